"""The files of one run's report: KPI row, learning curve, dispatch week and a Markdown summary.

Why apart from the callback (:mod:`iquitos_lightning.training.callbacks.report`): writing is plain data in,
files out, so the ``compare`` command and tests can call it without a Trainer. The KPI row uses
the reference table's format (:mod:`iquitos_lightning.report.tables`), so an agent's row reads
like the baselines' rows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from iquitos_lightning.atomic_files import write_atomically  # noqa: E402
from iquitos_lightning.metrics.kpis import KPI_UNITS  # noqa: E402
from iquitos_lightning.report.plots import (  # noqa: E402
    plot_daily_profile,
    plot_dispatch_week,
    save_figure,
    set_margins_in_inches,
    titles_at_the_top,
)
from iquitos_lightning.report.tables import kpi_table, to_markdown  # noqa: E402

CO2_KPI = "co2_kg"


# The evaluation KPIs drawn under the return, when the evaluation env is the site: (key, axis label, scale).
SELECTION_SCORE = "selection_score"  # an evaluation's select/score (agents/selection.py), when the run selects
CURVE_KPIS = (
    (CO2_KPI, "CO2 [t]", 1e-3),
    ("cost", "energy cost [k currency]", 1e-3),
    ("peak_import_kw", "peak grid import [kW]", 1.0),
    ("tariff_cost", "tariff bill [k currency]", 1e-3),
    # the selection year's score of each evaluation (env.validation_site_seed; the best one is best.ckpt)
    (SELECTION_SCORE, "selection-year score", 1.0),
)


@titles_at_the_top
def plot_learning_curve(
    train_returns: Sequence[tuple[int, float]],
    evaluations: Sequence[Mapping[str, float]],
    path: Path,
    *,
    title: str = "",
) -> Path:
    """Episode return over env frames (training episodes and evaluations); below it, each evaluation's CO2, energy
    cost, peak import and tariff bill (those the evaluations hold): what shows whether the policy got better."""
    panels = [kpi for kpi in CURVE_KPIS if any(kpi[0] in evaluation for evaluation in evaluations)]
    figure, axes = plt.subplots(1 + len(panels), 1, figsize=(10, 4.2 + 2.4 * len(panels)), sharex=True, squeeze=False)
    return_axis = axes[0, 0]
    if train_returns:
        frames, returns = zip(*train_returns, strict=True)
        return_axis.plot(frames, returns, color="#1f77b4", lw=1.0, alpha=0.7, marker=".", label="training episodes")
    scored = [evaluation for evaluation in evaluations if "episode_return" in evaluation]
    if scored:
        return_axis.plot(
            [evaluation["frames"] for evaluation in scored],
            [evaluation["episode_return"] for evaluation in scored],
            color="#d62728",
            lw=1.6,
            marker="o",
            label="evaluation (deterministic)",
        )
    return_axis.set_ylabel("episode return")
    return_axis.grid(alpha=0.3)
    if train_returns or scored:
        return_axis.legend(frameon=False)
    else:
        return_axis.text(0.5, 0.5, "no finished episode yet", ha="center", va="center", transform=return_axis.transAxes)
    for row, (kpi, label, scale) in enumerate(panels, start=1):
        axis = axes[row, 0]
        points = [(evaluation["frames"], evaluation[kpi] * scale) for evaluation in evaluations if kpi in evaluation]
        axis.plot(*zip(*points, strict=True), color=f"C{row + 1}", lw=1.6, marker="o")
        if kpi == SELECTION_SCORE:
            best = max(points, key=lambda point: point[1])  # the first of equal scores, as best.ckpt keeps it
            axis.plot(*best, marker="*", markersize=16, color="black", ls="none", label="best.ckpt")
            axis.legend(frameon=False)
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("environment frames")
    figure.suptitle(f"{title} learning curve".strip(), fontsize=13)
    # Fixed margins (six panels ~1.1 -> ~0.6 s of CPU, at the end of every fit and test; tick labels past 1e6 turn
    # scientific, so they fit the left margin).
    set_margins_in_inches(figure, left=0.95, right=0.2, top=0.55, bottom=0.6, hspace=0.12)
    return save_figure(figure, path)


# The health signals drawn, in this order, each on its own axis: (key, label, log scale).
HEALTH_PANELS = (
    ("approx_kl", "approx. KL per rollout", True),
    ("policy_drift", "policy drift per period", True),
    ("clip_fraction", "clip fraction", False),
    ("explained_variance", "explained variance", False),
    ("advantage_std", "advantage std", True),
    ("value_target_std", "value-target std", True),
    ("policy_scale", "policy scale (pre-tanh)", False),
    ("entropy_per_dim", "entropy per dim [nats]", False),
    ("actions_at_bounds", "share of actions at bounds", False),
    ("q_mean", "Q mean", False),
    ("q_std", "Q spread", False),
    ("q_twin_gap", "|Q1 - Q2|", False),
    ("target_q_mean", "target Q mean", False),
    ("alpha", "alpha", True),
    ("gradient_norm", "gradient norm", True),
    ("actor_gradient_norm", "actor gradient norm", True),
    ("critic_gradient_norm", "critic gradient norm", True),
)


@titles_at_the_top
def plot_health(
    health: Sequence[Mapping[str, float]], evaluations: Sequence[Mapping[str, float]], path: Path, *, title: str = ""
) -> Path:
    """The evaluation return, then each health signal the run logged, over env frames, in a grid: whether the
    policy moves, the critic fits and exploration holds, read beside whether the return rises."""
    panels = [panel for panel in HEALTH_PANELS if any(panel[0] in row for row in health)]
    columns = 3
    rows = 1 + math.ceil(len(panels) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(15, 2.8 * rows), squeeze=False)
    return_axis = axes[0, 0]
    scored = [evaluation for evaluation in evaluations if "episode_return" in evaluation]
    if scored:
        return_axis.plot([e["frames"] for e in scored], [e["episode_return"] for e in scored], "o-", color="#d62728")
    return_axis.set_title("evaluation return", fontsize=10)
    for axis in axes[0, 1:]:
        axis.axis("off")
    for index, (key, label, log_scale) in enumerate(panels):
        axis = axes[1 + index // columns, index % columns]
        points = [(row["frames"], row[key]) for row in health if key in row and math.isfinite(row[key])]
        if points:
            frames, values = zip(*points, strict=True)
            axis.plot(frames, values, lw=1.0, marker="." if len(points) < 60 else None, color=f"C{index % 10}")
            if log_scale and min(values) > 0 and max(values) > 10 * min(values):  # spans a decade
                axis.set_yscale("log")
        axis.set_title(label, fontsize=10)
    for index in range(len(panels), (rows - 1) * columns):
        axes[1 + index // columns, index % columns].axis("off")
    for axis in axes.flat:
        axis.grid(alpha=0.3)
        axis.tick_params(labelsize=8)
    figure.supxlabel("environment frames")
    figure.suptitle(f"{title} learning health".strip(), fontsize=13)
    # Fixed margins: the panels' labels are short and alike (18 panels ~2.6 -> ~1.9 s of CPU, at the end of every fit).
    set_margins_in_inches(figure, left=0.75, right=0.225, top=0.8, bottom=0.65, wspace=0.2, hspace=0.42)
    return save_figure(figure, path)


def write_rows_csv(path: Path, rows: Sequence[Mapping[str, float]]) -> Path:
    """Rows of the run as CSV, one per evaluation (frames, return, KPIs: the learning curves ``compare`` draws) or
    per rollout (frames and health signals)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(list(rows)).to_csv(path, index=False)
    return path


def write_kpi_row(path: Path, row: Mapping[str, Any]) -> Path:
    """One controller's KPI row as JSON (``kpis.json``): the one function that writes such a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(row), indent=2) + "\n")
    return path


def write_run_report(
    folder: Path,
    *,
    stage: str,
    controller: str,
    counters: Mapping[str, Any],
    elapsed_s: float,
    frames_this_run: int,
    metrics: Mapping[str, float],
    train_returns: Sequence[tuple[int, float]],
    evaluations: Sequence[Mapping[str, float]],
    site_flows: tuple[pd.DataFrame, int] | None,
    health: Sequence[Mapping[str, float]] = (),
    curves_drawn_in: Path | None = None,
    plots: bool = True,
) -> list[Path]:
    """Write the report of one ``fit`` or ``test`` into ``folder``; return the files written (with ``plots`` false,
    no image: the tables and the summary only).

    ``curves_drawn_in``: a report folder whose learning curve and health plots already show these very rows (the
    run's previous write: a ``test`` right after ``fit`` adds none); they are copied from there, or kept when it is
    ``folder``, rather than drawn again (~2-3 s of CPU each time, matplotlib's drawing)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    kpis = {name: value for name, value in metrics.items() if name in KPI_UNITS}
    if kpis:
        table = kpi_table({controller: kpis})
        (folder / "kpis.md").write_text(to_markdown(table))
        written.append(folder / "kpis.md")
    row = {"controller": controller, "stage": stage, **counters, **metrics}
    written.append(write_kpi_row(folder / "kpis.json", row))
    if plots:
        written.append(
            _drawn_once(
                folder / "learning_curve.png",
                curves_drawn_in,
                lambda path: plot_learning_curve(train_returns, evaluations, path, title=controller),
            )
        )
    if evaluations:
        written.append(write_rows_csv(folder / "evaluations.csv", evaluations))
    if health and plots:
        written.append(
            _drawn_once(
                folder / "health.png",
                curves_drawn_in,
                lambda path: plot_health(health, evaluations, path, title=controller),
            )
        )
    if health:
        written.append(write_rows_csv(folder / "health.csv", health))
    if site_flows is not None and plots:
        flows, year = site_flows
        written.append(
            plot_dispatch_week({controller: flows}, folder / "dispatch_week.png", year=year, title=controller)
        )
        written.append(plot_daily_profile({controller: flows}, folder / "daily_profile.png", title=controller))
    wall_time = None
    if stage == "fit" and elapsed_s > 0:
        rate = f", {frames_this_run / elapsed_s:,.1f} frames/s" if frames_this_run > 0 else ""
        wall_time = f"- wall time of this fit: {elapsed_s:,.1f} s{rate}"
    summary = _summary_markdown(f"# {controller}: {stage} report", counters, metrics, written, wall_time)
    (folder / "summary.md").write_text(summary)
    written.append(folder / "summary.md")
    return written


def _drawn_once(path: Path, drawn_in: Path | None, draw: Callable[[Path], Path]) -> Path:
    """``path``, drawn by ``draw`` unless ``drawn_in`` holds the same plot already (then copied, or kept there)."""
    earlier = None if drawn_in is None else Path(drawn_in) / path.name
    if earlier is None or not earlier.is_file():
        return draw(path)
    if earlier.resolve() != path.resolve():
        write_atomically(earlier.read_bytes(), path, "report")
    return path


def _summary_markdown(
    title: str,
    counters: Mapping[str, Any],
    metrics: Mapping[str, float],
    written: Sequence[Path],
    wall_time: str | None,
) -> str:
    frames = counters.get("frames_done")
    budget = counters.get("frame_budget")
    lines = [title, ""]
    if frames is not None:
        lines.append(f"- environment frames trained: {frames:,}" + (f" of a budget of {budget:,}" if budget else ""))
    for name, label in (("updates_done", "gradient updates"), ("episodes_done", "training episodes finished")):
        if counters.get(name) is not None:
            lines.append(f"- {label}: {counters[name]:,}")
    if wall_time is not None:
        lines.append(wall_time)
    if counters.get("last_episode_return") is not None:
        lines.append(f"- last training episode return: {counters['last_episode_return']:.4g}")
    if "episode_return" in metrics:
        lines.append(f"- evaluation episode return (deterministic policy): {metrics['episode_return']:.4g}")
    lines.append("")
    if (Path(written[0]).name if written else "") == "kpis.md":
        lines += ["## KPIs of the evaluation episode", "", Path(written[0]).read_text(), ""]
    images = [path for path in written if path.suffix == ".png"]
    for image in images:
        lines += [f"![{image.stem}]({image.name})", ""]
    return "\n".join(lines)
