"""The comparison table: references and agents (mean +/- std over seeds) on the same year, with plots.

Why its own module: the aggregation is the claim the project makes, so it is a plain function of
the per-run KPI rows, tested with hand-computed numbers. Each table is of one objective (``thesis`` or
``tariff``, the one the agents were trained on): every row shows its value on that objective and the share
of the rule-based-to-optimum gap of that objective it closes, ``(value - rule) / (optimum - rule)``: 0 % is
the rule-based controller, 100 % the perfect-foresight LP of that objective; beside it the tariff-aware
rule and both MPC variants of that objective.
An agent serves EVs when its unmet EV energy is within :data:`EV_SERVICE_TOLERANCE` of the
unavoidable unmet energy (need beyond charger power x dwell, which no controller can deliver).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from iquitos_lightning.report.plots import save_figure  # noqa: E402
from iquitos_lightning.report.run_report import SELECTION_SCORE  # noqa: E402
from iquitos_lightning.report.tables import column_label, format_value  # noqa: E402

REFERENCES = ("uncontrolled", "rule_based", "optimum")  # the rows of a reference table made before the objectives
# The references of each objective, in the order a reader compares them (baselines.json rows).
OBJECTIVE_REFERENCES = (
    "uncontrolled",
    "rule_based",
    "tariff_rule",
    "mpc_forecast_{objective}",
    "mpc_robust_{objective}",  # tariff only
    "mpc_perfect_{objective}",
    "optimum_{objective}",
)
OBJECTIVE_VALUE = {"thesis": "thesis_return", "tariff": "tariff_cost"}  # higher return is better, lower bill is
TABLE_KPIS = (
    "objective_value",
    "objective_gap_closed_pct",
    "co2_t",
    "cost",
    "peak_import_kw",
    "pv_self_consumption_pct",
    "ev_energy_served_kwh",
    "ev_unmet_kwh",
    "bess_equivalent_full_cycles",
)
EV_SERVICE_TOLERANCE = 0.01  # share of the EV energy served by the rule-based reference
# Optional text columns of a table (experiments/compare.py adds them): what each row knew, and which years trained it
INFORMATION_COLUMNS = {
    "starts_from": "starts from",
    "information": "knew ahead",
    "trained_on": "trained on (site seeds)",
}


def gap_closed_pct(value: float, start: float, best: float) -> float:
    """Share (%) of the ``start``-to-``best`` gap that ``value`` closes (0: no better than ``start``; 100: ``best``)."""
    gap = best - start
    return float("nan") if abs(gap) < 1e-9 else 100.0 * (value - start) / gap


def reference_names(references: Mapping[str, object], objective: str) -> list[str]:
    """The reference rows of ``objective`` in ``references`` (an older table: uncontrolled, rule-based, optimum)."""
    names = [name.format(objective=objective) for name in OBJECTIVE_REFERENCES]
    present = [name for name in names if name in references]
    return present if f"optimum_{objective}" in present else [name for name in REFERENCES if name in references]


def objective_value(kpis: Mapping[str, float], objective: str, agent: bool) -> float:
    """A row's value on ``objective``: the thesis return (an agent trained on it: its evaluation return) or the
    tariff bill (currency per year)."""
    if agent and objective == "thesis":
        return float(kpis.get("episode_return", float("nan")))
    return float(kpis.get(OBJECTIVE_VALUE[objective], float("nan")))


def comparison_rows(
    references: Mapping[str, Mapping[str, float]],
    runs_by_agent: Mapping[str, Sequence[Mapping[str, float]]],
    unavoidable_unmet_kwh: float,
    objective: str = "thesis",
) -> pd.DataFrame:
    """One row per controller: references as they are, agents as mean and std over their runs.

    Columns: each KPI of :data:`TABLE_KPIS` (the mean for agents) and ``<kpi>_std`` (agents only),
    ``seeds`` and ``ev_served`` (unmet EV energy within tolerance of the unavoidable part).
    ``objective_value`` is the row's thesis return or tariff bill, ``objective_gap_closed_pct`` the share of
    the rule-based-to-optimum gap of that objective it closes (the agents' own objective: what they optimise).
    """
    names = reference_names(references, objective)
    best_name = f"optimum_{objective}" if f"optimum_{objective}" in names else "optimum"
    rule = objective_value(references["rule_based"], objective, agent=False)
    best = objective_value(references[best_name], objective, agent=False)
    tolerance = EV_SERVICE_TOLERANCE * references["rule_based"]["ev_energy_served_kwh"]

    def derived(kpis: Mapping[str, float], agent: bool) -> dict[str, float]:
        row = {name: float(kpis[name]) for name in TABLE_KPIS if name in kpis}
        row["co2_t"] = float(kpis["co2_kg"]) / 1000
        row["objective_value"] = objective_value(kpis, objective, agent)
        row["objective_gap_closed_pct"] = gap_closed_pct(row["objective_value"], rule, best)
        return row

    rows: dict[str, dict[str, float | bool | int]] = {}
    for name in names:
        rows[name] = {**derived(references[name], agent=False), "seeds": 0}
    for agent, runs in runs_by_agent.items():
        if not runs:
            continue
        table = pd.DataFrame([derived(run, agent=True) for run in runs])
        row: dict[str, float | bool | int] = {name: float(table[name].mean()) for name in table.columns}
        row |= {f"{name}_std": float(table[name].std(ddof=1)) if len(table) > 1 else 0.0 for name in table.columns}
        row["seeds"] = len(table)
        rows[agent] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame["ev_served"] = frame["ev_unmet_kwh"] <= unavoidable_unmet_kwh + tolerance
    frame.index.name = "controller"
    frame.attrs["objective"] = objective
    return frame


def _label(kpi: str, currency: str, objective: str) -> str:
    if kpi == "co2_t":
        return "co2 [t]"
    if kpi == "objective_value":
        return "thesis return (higher is better)" if objective == "thesis" else f"tariff bill [{currency}/yr]"
    if kpi == "objective_gap_closed_pct":
        return "rule-to-optimum gap closed [%]"
    return column_label(kpi, currency)


def _cell(kpi: str, value: float, objective: str) -> str:
    if np.isnan(value):
        return "-"
    if kpi == "co2_t":
        return f"{value:,.1f}"
    if kpi == "objective_value":
        return f"{value:,.2f}" if objective == "thesis" else f"{value:,.0f}"
    if kpi == "objective_gap_closed_pct":
        return f"{value:,.1f}"
    return format_value(kpi, value)


def comparison_markdown(table: pd.DataFrame, currency: str = "PEN") -> str:
    """The table as Markdown: agents as ``mean +/- std (n seeds)``, EV service flagged where it fails."""
    objective = table.attrs.get("objective", "thesis")
    kpis = [kpi for kpi in TABLE_KPIS if kpi in table.columns]
    notes = [column for column in INFORMATION_COLUMNS if column in table.columns]  # what each row knew
    headers = ["controller", *(INFORMATION_COLUMNS[column] for column in notes)]
    headers += [*(_label(kpi, currency, objective) for kpi in kpis), "EVs served"]
    aligns = [":---", *[":---"] * len(notes), *["---:"] * len(kpis), ":---:"]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(aligns) + "|"]
    for controller, row in table.iterrows():
        seeds = int(row["seeds"])
        cells = []
        for kpi in kpis:
            text = _cell(kpi, row[kpi], objective)
            std = row.get(f"{kpi}_std")
            if seeds > 1 and std is not None and not np.isnan(std) and not np.isnan(row[kpi]):
                text += f" ± {_cell(kpi, std, objective)}"
            cells.append(text)
        name = f"{controller} ({seeds} seeds)" if seeds else str(controller)
        known = [str(row[column]) for column in notes]
        lines.append("| " + " | ".join([name, *known, *cells, "yes" if row["ev_served"] else "**NO**"]) + " |")
    return "\n".join(lines) + "\n"


# Panels of the comparison's learning curves: (column of a run's evaluations, axis label, scale).
CURVE_PANELS = (
    ("objective_value", "", 1.0),
    ("co2_kg", "CO2 [t]", 1e-3),
    ("cost", "energy cost [k {currency}]", 1e-3),
    ("peak_import_kw", "peak grid import [kW]", 1.0),
)


# Two sets of ten colours, the second with its own marker and line style: a table of a dozen rows stays legible.
_SECOND_TEN = [matplotlib.colormaps["tab20b"](index) for index in (0, 4, 8, 12, 16, 2, 6, 10, 14, 18)]
LOG_FRAMES_SPAN = 20.0  # frames on a log axis once the longest run is this many times the earliest evaluation


def agent_style(index: int) -> dict[str, object]:
    """Colour, marker and line style of the ``index``-th agent row: matplotlib's ten colours with dots, then ten
    darker tab20b colours with triangles and dashes, then the cycle again (agents past 20 share a style)."""
    index %= 20
    if index < 10:
        return {"color": f"C{index}", "marker": ".", "ls": "-"}
    return {"color": _SECOND_TEN[index - 10], "marker": "^", "ls": "--"}


def zoom_limits(rule: float, optimum: float) -> tuple[float, float]:
    """The value range of the zoomed objective panel: from two rule-to-optimum gaps worse than the rule to half
    a gap better than the optimum, in whichever direction is better (a return rises, a bill falls). Why: the rows
    worth comparing sit within a few gaps of the rule, while one untrained row can stretch the full panel 50 gaps
    wide."""
    gap = optimum - rule
    low, high = sorted((rule - 2.0 * gap, optimum + 0.5 * gap))
    return low, high


NOT_REPORTED = "restarts not reported"  # runs that scored lower on the selection year


def plot_learning_curves(
    curves: Mapping[str, pd.DataFrame],
    path: Path,
    *,
    title: str = "",
    references: pd.DataFrame | None = None,
    currency: str = "PEN",
    reported: set[str] | None = None,
) -> Path:
    """The evaluations during training of every run over env frames (one colour, marker and line style per agent
    row): the value of the objective, the same zoomed onto the rule-to-optimum range (:func:`zoom_limits`), CO2,
    energy cost and peak import; the references of ``references`` (a :func:`comparison_rows` table) as horizontal
    lines, so a curve reads against the rule-based controller and the optimum; a run with a selection year has its
    chosen evaluation starred; with ``reported`` (``compare --restarts``) the runs not in it are drawn faint and
    unstarred, as tries the table does not report. Frames are on a log axis when the budgets differ by more than
    :data:`LOG_FRAMES_SPAN` (SAC's 131k frames beside PPO's 1.6M), the legend beside the panels."""
    objective = references.attrs.get("objective", "thesis") if references is not None else "thesis"
    optimum_name = f"optimum_{objective}"
    zoom = None
    if references is not None and {"rule_based", optimum_name} <= set(references.index):
        value = references["objective_value"]
        zoom = zoom_limits(float(value["rule_based"]), float(value[optimum_name]))
    panels = [CURVE_PANELS[0], *([CURVE_PANELS[0]] if zoom else []), *CURVE_PANELS[1:]]
    figure, axes = plt.subplots(len(panels), 1, figsize=(13, 3 * len(panels)), sharex=True)
    styles: dict[str, dict[str, object]] = {}
    for name, curve in curves.items():
        agent = name.split("-seed")[0]
        style = styles.setdefault(agent, agent_style(len(styles)))
        shown = reported is None or name in reported
        line = {"lw": 1.2, "alpha": 0.8, "label": agent} if shown else {"lw": 0.8, "alpha": 0.25, "label": NOT_REPORTED}
        for axis, (column, _, scale) in zip(axes, panels, strict=True):
            if column in curve:
                axis.plot(curve["frames"], curve[column] * scale, **line, **style)
        if shown and SELECTION_SCORE in curve and curve[SELECTION_SCORE].notna().any():
            chosen = curve.loc[curve[SELECTION_SCORE].idxmax()]  # the first best, as best.ckpt keeps it
            column, _, scale = CURVE_PANELS[0]
            for axis in axes[: 2 if zoom else 1]:
                axis.plot(chosen["frames"], chosen[column] * scale, marker="*", ms=13, color=style["color"],
                          mec="black", ls="none", label="chosen on the selection year")  # fmt: skip
    if references is not None:
        lines = {"rule_based": ":", "tariff_rule": "-.", optimum_name: "--"}
        for axis, (column, _, scale) in zip(axes, panels, strict=True):
            for name, line in lines.items():
                if name in references.index and column in references.columns:
                    level = float(references.loc[name, column]) * scale
                    axis.axhline(level, color="#555555", ls=line, lw=1, label=name)
    value_label = "thesis return (higher is better)" if objective == "thesis" else f"tariff bill [{currency}/yr]"
    for axis, (column, label, _) in zip(axes, panels, strict=True):
        axis.set_ylabel(value_label if column == "objective_value" else label.format(currency=currency))
        axis.grid(alpha=0.3)
    if zoom:
        axes[1].set_ylim(*zoom)
        axes[1].set_ylabel(f"{value_label}\nnear the references")
    frames = [float(value) for curve in curves.values() if "frames" in curve for value in curve["frames"] if value > 0]
    if frames and max(frames) > LOG_FRAMES_SPAN * min(frames):
        axes[-1].set_xscale("log")
    handles, labels = axes[0].get_legend_handles_labels()
    one_each = dict(zip(labels, handles, strict=True))
    figure.legend(one_each.values(), one_each.keys(), frameon=False, fontsize=8, loc="upper left",
                  bbox_to_anchor=(0.83, 0.98))  # fmt: skip
    axes[-1].set_xlabel("environment frames (training)")
    axes[0].set_title(f"{title} evaluations during training (deterministic policy, full year)".strip(), loc="left")
    figure.tight_layout(rect=(0.0, 0.0, 0.82, 1.0))  # the right of the figure holds the legend
    return save_figure(figure, path)


def plot_objective_and_co2_bars(table: pd.DataFrame, path: Path, *, currency: str = "PEN", title: str = "") -> Path:
    """The objective's value and CO2 per controller (agents with their std over seeds), the optimum as a line."""
    objective = table.attrs.get("objective", "thesis")
    value_unit = "thesis return (higher is better)" if objective == "thesis" else f"tariff bill [k {currency}/yr]"
    value_scale = 1.0 if objective == "thesis" else 1e-3
    panels = (("objective_value", value_unit, value_scale, objective), ("co2_t", "t CO2 per year", 1.0, "CO2"))
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    names = list(table.index)
    positions = np.arange(len(names))
    best = next(name for name in (f"optimum_{objective}", "optimum") if name in table.index)
    for axis, (kpi, unit, scale, heading) in zip(axes, panels, strict=True):
        values = table[kpi].to_numpy(dtype=float) * scale
        errors = table.get(f"{kpi}_std", pd.Series(0.0, index=table.index)).fillna(0.0).to_numpy(dtype=float) * scale
        colours = ["#1f77b4" if table.loc[name, "seeds"] else "#7f7f7f" for name in names]
        axis.bar(positions, values, yerr=errors, color=colours, capsize=4)
        axis.axhline(float(table.loc[best, kpi]) * scale, color="#2ca02c", lw=1.5, ls="--", label=best)
        low, high = float(np.nanmin(values - errors)), float(np.nanmax(values + errors))
        margin = 0.15 * max(high - low, 1e-9)
        axis.set_ylim(low - margin, high + margin)  # differences are a few percent: do not start at zero
        axis.set_xticks(positions, names, rotation=20, ha="right")
        axis.set_ylabel(unit)
        axis.set_title(heading, loc="left")
        axis.grid(axis="y", alpha=0.3)
        axis.legend(frameon=False)
    figure.suptitle(title, fontsize=13)
    figure.tight_layout()
    return save_figure(figure, path)
