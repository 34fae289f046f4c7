"""The comparison table: references and agents (mean +/- std over seeds) on the same year, with plots.

Why its own module: the aggregation is the claim the project makes, so it is a plain function of
the per-run KPI rows, tested with hand-computed numbers. The share of the CO2 gap an agent closes is
``(CO2_uncontrolled - CO2_agent) / (CO2_uncontrolled - CO2_optimum)``: 0 % is no better than
plugging everything in at once, 100 % is the perfect-foresight optimum.
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
from iquitos_lightning.report.tables import column_label, format_value  # noqa: E402

REFERENCES = ("uncontrolled", "rule_based", "optimum")
TABLE_KPIS = (
    "grid_import_kwh",
    "co2_kg",
    "co2_t",
    "cost",
    "peak_import_kw",
    "pv_self_consumption_pct",
    "ev_energy_served_kwh",
    "ev_unmet_kwh",
    "departures_below_required",
    "bess_equivalent_full_cycles",
    "co2_gap_closed_pct",
)
EV_SERVICE_TOLERANCE = 0.01  # share of the EV energy served by the rule-based reference


def gap_closed_pct(co2: float, uncontrolled: float, optimum: float) -> float:
    """Share (%) of the uncontrolled-to-optimum CO2 gap that ``co2`` closes."""
    gap = uncontrolled - optimum
    return float("nan") if abs(gap) < 1e-9 else 100.0 * (uncontrolled - co2) / gap


def comparison_rows(
    references: Mapping[str, Mapping[str, float]],
    runs_by_agent: Mapping[str, Sequence[Mapping[str, float]]],
    unavoidable_unmet_kwh: float,
) -> pd.DataFrame:
    """One row per controller: references as they are, agents as mean and std over their runs.

    Columns: each KPI of :data:`TABLE_KPIS` (the mean for agents) and ``<kpi>_std`` (agents only),
    ``seeds`` and ``ev_served`` (unmet EV energy within tolerance of the unavoidable part).
    """
    uncontrolled, optimum = references["uncontrolled"]["co2_kg"], references["optimum"]["co2_kg"]
    tolerance = EV_SERVICE_TOLERANCE * references["rule_based"]["ev_energy_served_kwh"]

    def derived(kpis: Mapping[str, float]) -> dict[str, float]:
        row = {name: float(kpis[name]) for name in TABLE_KPIS if name in kpis}
        row["co2_t"] = float(kpis["co2_kg"]) / 1000
        row["co2_gap_closed_pct"] = gap_closed_pct(float(kpis["co2_kg"]), uncontrolled, optimum)
        return row

    rows: dict[str, dict[str, float | bool | int]] = {}
    for name in REFERENCES:
        rows[name] = {**derived(references[name]), "seeds": 0}
    for agent, runs in runs_by_agent.items():
        if not runs:
            continue
        table = pd.DataFrame([derived(run) for run in runs])
        row: dict[str, float | bool | int] = {name: float(table[name].mean()) for name in table.columns}
        row |= {f"{name}_std": float(table[name].std(ddof=1)) if len(table) > 1 else 0.0 for name in table.columns}
        row["seeds"] = len(table)
        rows[agent] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame["ev_served"] = frame["ev_unmet_kwh"] <= unavoidable_unmet_kwh + tolerance
    frame.index.name = "controller"
    return frame


def _label(kpi: str, currency: str) -> str:
    if kpi == "co2_t":
        return "co2 [t]"
    if kpi == "co2_gap_closed_pct":
        return "CO2 gap closed [%]"
    return column_label(kpi, currency)


def _cell(kpi: str, value: float) -> str:
    if kpi == "co2_t":
        return f"{value:,.1f}"
    if kpi == "co2_gap_closed_pct":
        return "-" if np.isnan(value) else f"{value:,.1f}"
    return format_value(kpi, value)


def comparison_markdown(table: pd.DataFrame, currency: str = "PEN") -> str:
    """The table as Markdown: agents as ``mean +/- std (n seeds)``, EV service flagged where it fails."""
    kpis = [kpi for kpi in TABLE_KPIS if kpi in table.columns]
    headers = ["controller", *(_label(kpi, currency) for kpi in kpis), "EVs served"]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join([":---", *["---:"] * len(kpis), ":---:"]) + "|"]
    for controller, row in table.iterrows():
        seeds = int(row["seeds"])
        cells = []
        for kpi in kpis:
            text = _cell(kpi, row[kpi])
            std = row.get(f"{kpi}_std")
            if seeds > 1 and std is not None and not np.isnan(std):
                text += f" ± {_cell(kpi, std)}"
            cells.append(text)
        name = f"{controller} ({seeds} seeds)" if seeds else str(controller)
        lines.append("| " + " | ".join([name, *cells, "yes" if row["ev_served"] else "**NO**"]) + " |")
    return "\n".join(lines) + "\n"


def plot_learning_curves(curves: Mapping[str, pd.DataFrame], path: Path, *, title: str = "") -> Path:
    """Training episode return over env frames of every run, one colour per agent."""
    figure, axis = plt.subplots(figsize=(10, 5))
    colours = {}
    for name, curve in curves.items():
        agent = name.split("-seed")[0]
        colour = colours.setdefault(agent, f"C{len(colours)}")
        axis.plot(curve["frames"], curve["episode_return"], color=colour, marker=".", lw=1.2, alpha=0.8, label=agent)
    handles, labels = axis.get_legend_handles_labels()
    one_per_agent = dict(zip(labels, handles, strict=True))
    axis.legend(one_per_agent.values(), one_per_agent.keys(), frameon=False)
    axis.set_xlabel("environment frames")
    axis.set_ylabel("training episode return")
    axis.grid(alpha=0.3)
    axis.set_title(f"{title} learning curves (every run)".strip(), loc="left")
    figure.tight_layout()
    return save_figure(figure, path)


def plot_co2_cost_bars(table: pd.DataFrame, path: Path, *, currency: str = "PEN", title: str = "") -> Path:
    """CO2 and cost per controller (agents with their std over seeds), the optimum drawn as a line."""
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    names = list(table.index)
    positions = np.arange(len(names))
    for axis, kpi, unit, scale in ((axes[0], "co2_kg", "t CO2", 1e-3), (axes[1], "cost", f"k {currency}", 1e-3)):
        values = table[kpi].to_numpy(dtype=float) * scale
        errors = table.get(f"{kpi}_std", pd.Series(0.0, index=table.index)).fillna(0.0).to_numpy(dtype=float) * scale
        colours = ["#7f7f7f" if name in REFERENCES else "#1f77b4" for name in names]
        axis.bar(positions, values, yerr=errors, color=colours, capsize=4)
        axis.axhline(float(table.loc["optimum", kpi]) * scale, color="#2ca02c", lw=1.5, ls="--", label="optimum")
        low, high = float(np.nanmin(values - errors)), float(np.nanmax(values + errors))
        margin = 0.15 * max(high - low, 1e-9)
        axis.set_ylim(low - margin, high + margin)  # differences are a few percent: do not start at zero
        axis.set_xticks(positions, names, rotation=20)
        axis.set_ylabel(unit)
        axis.set_title(f"{'CO2' if kpi == 'co2_kg' else 'cost'} per year", loc="left")
        axis.grid(axis="y", alpha=0.3)
        axis.legend(frameon=False)
    figure.suptitle(title, fontsize=13)
    figure.tight_layout()
    return save_figure(figure, path)
