"""``benchmark citylearn-2022``: the project's controllers on CityLearn's own 2022 data, beside a published table.

Why: every other figure of the project comes from its own synthetic site. This command runs the published protocol
(dvoitekh/mpc-gap-citylearn: three phases of ``citylearn_challenge_2022_phase_all``, score = (cost + emissions +
grid) / 3 as ratios to no battery, weighted 0.2 / 0.3 / 0.5) on the measured data in the package, offline, and writes
``results/citylearn-2022/``: the page (``README.md``), ``scores.csv`` and ``scores.json`` (every row, phase and KPI)
and ``weighted_scores.png`` (every row beside the published rows), with the command and revision that made them.
Agent rows (``agents.json``, written by the agents' runs) are read into the same page when present.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iquitos_lightning.citylearn_2022.controllers import (
    CityLearnRule,
    ModelPredictive,
    NoControl,
    PerfectForesightPlan,
    SelfConsumptionRule,
)
from iquitos_lightning.citylearn_2022.dataset import PHASES, PUBLISHED_PV_KW, Phase
from iquitos_lightning.citylearn_2022.scoring import weighted_phase_score
from iquitos_lightning.citylearn_2022.simulation import Controller, run_phase
from iquitos_lightning.report.provenance import git_revision

SOURCE = "dvoitekh/mpc-gap-citylearn (MIT), docs/REPRODUCING.md and results/verify_*.json"
# The published table: per phase and weighted, CityLearn 2.2b0's evaluate() district rows.
PUBLISHED: dict[str, tuple[float, float, float, float]] = {
    "full-horizon LP, perfect foresight": (0.650, 0.703, 0.647, 0.664),
    "MPC + perfect forecast": (0.684, 0.734, 0.695, 0.705),
    "MPC + LightGBM/persistence average": (0.834, 0.879, 0.799, 0.830),
    "MPC + persistence": (0.852, 0.905, 0.815, 0.850),
    "no control": (1.000, 1.000, 1.000, 1.000),
}


# The published MPCs' penalty on action changes. Both MPCs are rows with and without it: nothing here is chosen or tuned
# on the phases, which are the only data scored (docs/citylearn-2022.md).
PUBLISHED_SMOOTHING = 0.1


@dataclass(frozen=True)
class Reference:
    """A reference row: how to build its controller, what it knows, and its published counterpart."""

    label: str
    make: Callable[[], Controller]
    knows: str
    counterpart: str | None


REFERENCES: dict[str, Reference] = {
    "none": Reference("no control", NoControl, "nothing (batteries idle)", "no control"),
    "rule": Reference("CityLearn rule (BasicBatteryRBC)", CityLearnRule, "the hour only (CityLearn's own rule)", None),
    "self_consumption": Reference(
        "self-consumption rule",
        SelfConsumptionRule,
        "the hour before: store its surplus, cover its import (a home battery's own mode)",
        None,
    ),
    "lp_published": Reference(
        "full-horizon LP, published inputs (PV 4 kW)",
        lambda: PerfectForesightPlan(pv_kw=PUBLISHED_PV_KW),
        "every row of the phase, every PV read as 4 kW (the published LP's inputs)",
        "full-horizon LP, perfect foresight",
    ),
    "lp": Reference(
        "full-horizon LP, true PV sizes",
        PerfectForesightPlan,
        "every row of the phase (the project's reference optimum)",
        "full-horizon LP, perfect foresight",
    ),
    "mpc_perfect": Reference(
        "MPC 24 h, perfect forecast",
        lambda: ModelPredictive("perfect"),
        "the next 24 rows exactly; re-planned every hour",
        "MPC + perfect forecast",
    ),
    "mpc_persistence": Reference(
        "MPC 24 h, persistence forecast",
        lambda: ModelPredictive("past_days", days=1),
        "yesterday's same hours; re-planned every hour",
        "MPC + persistence",
    ),
    "mpc_perfect_smoothed": Reference(
        "MPC 24 h, perfect forecast, smoothed",
        lambda: ModelPredictive("perfect", smoothing=PUBLISHED_SMOOTHING),
        "as MPC perfect, action changes penalised 0.1 as in the published MPCs",
        "MPC + perfect forecast",
    ),
    "mpc_persistence_smoothed": Reference(
        "MPC 24 h, persistence forecast, smoothed",
        lambda: ModelPredictive("past_days", days=1, smoothing=PUBLISHED_SMOOTHING),
        "as MPC persistence, action changes penalised 0.1 as in the published MPCs",
        "MPC + persistence",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m iquitos_lightning benchmark citylearn-2022",
        description="The published CityLearn 2022 protocol (three phases of the challenge's measured data) for the "
        "project's references, written with the published rows beside them to results/citylearn-2022/.",
    )
    parser.add_argument(
        "--rows",
        default=",".join(REFERENCES),
        help="reference rows, comma-separated (default: all: %(default)s)",
    )
    parser.add_argument(
        "--hours",
        type=int,
        default=None,
        help="score only each phase's first N hours (a quick look or a test; the page says so; default: whole phases)",
    )
    parser.add_argument("--results", type=Path, default=Path("results"), help="results root (default: %(default)s)")
    return parser


def main(args: Sequence[str]) -> int:
    """``benchmark citylearn-2022 [--rows ...] [--hours N] [--results DIR]``; exit 2 with one line on bad input."""
    if not args or args[0] != "citylearn-2022":
        print("error: benchmark needs a benchmark name: citylearn-2022 (see `benchmark citylearn-2022 --help`)",
              file=sys.stderr)  # fmt: skip
        return 2
    namespace = build_parser().parse_args(list(args[1:]))
    rows = [row.strip() for row in namespace.rows.split(",") if row.strip()]
    unknown = [row for row in rows if row not in REFERENCES]
    if unknown or not rows:
        print(f"error: --rows {namespace.rows!r}: choose from {', '.join(REFERENCES)}", file=sys.stderr)
        return 2
    phases = PHASES
    if namespace.hours is not None:
        try:
            phases = tuple(phase.shortened(namespace.hours) for phase in PHASES)
        except ValueError as error:
            print(f"error: --hours {namespace.hours}: {error}", file=sys.stderr)
            return 2
    run_benchmark(
        rows, phases, namespace.results / "citylearn-2022", ["benchmark", *args], whole=namespace.hours is None
    )
    return 0


def run_reference(key: str, phases: Sequence[Phase]) -> dict[str, Any]:
    """One reference row over ``phases``: per-phase KPIs, the weighted scores and the seconds each phase took."""
    reference = REFERENCES[key]
    per_phase = []
    for phase in phases:
        run = run_phase(reference.make(), phase)
        per_phase.append({"phase": phase.name, "rows": [phase.first, phase.last], "seconds": round(run.seconds, 1),
                          **run.score.as_dict()})  # fmt: skip
        print(f"{reference.label}: {phase.name} score {run.score.score:.4f} ({run.seconds:.0f} s)", flush=True)
    return {
        "key": key,
        "label": reference.label,
        "knows": reference.knows,
        "trained_on": "nothing (no learning)",
        "counterpart": reference.counterpart,
        "phases": per_phase,
        "weighted": weighted_phase_score(per_phase),
        "weighted_2022": weighted_phase_score(per_phase, key="score_2022"),
        "minutes": round(sum(phase["seconds"] for phase in per_phase) / 60, 1),
    }


def run_benchmark(rows: Sequence[str], phases: Sequence[Phase], out: Path, command: Sequence[str], whole: bool) -> None:
    """Every row in ``rows`` over ``phases``; the page, CSV, JSON and figure in ``out`` (rows of an earlier run of
    this command that were not rerun are kept, so one row can be redone alone)."""
    out.mkdir(parents=True, exist_ok=True)
    previous = _read_rows(out / "scores.json") if whole else {}
    started = time.perf_counter()
    results = dict(previous)
    for key in rows:
        results[key] = {**run_reference(key, phases), "command": "python -m iquitos_lightning " + " ".join(command),
                        "revision": git_revision()}  # fmt: skip
    ordered = [results[key] for key in REFERENCES if key in results]
    agents = _read_agents(out / "agents.json")
    (out / "scores.json").write_text(json.dumps({"whole_phases": whole, "rows": ordered}, indent=2) + "\n")
    _write_csv(out / "scores.csv", [*ordered, *agents])
    _plot(out / "weighted_scores.png", [*ordered, *agents])
    _plot_curves(out / "learning_curves.png", out / "curves", agents)
    (out / "README.md").write_text(page(ordered, agents, whole, phases))
    print(f"benchmark citylearn-2022: {len(rows)} rows in {(time.perf_counter() - started) / 60:.1f} min -> {out}")


def _read_rows(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    saved = json.loads(path.read_text())
    return {row["key"]: row for row in saved["rows"]} if saved.get("whole_phases") else {}


def _read_agents(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text())["rows"] if path.exists() else []


def _write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    kpis = [key for key in rows[0]["phases"][0] if key not in ("phase", "rows", "seconds")] if rows else []
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["row", "phase", "seconds", *kpis])
        for row in rows:
            for phase in row["phases"]:
                writer.writerow([row["label"], phase["phase"], phase.get("seconds", ""),
                                 *(phase.get(kpi, "") for kpi in kpis)])  # fmt: skip


def _plot(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Each row's weighted score (bars) and its three phases (dots), the published rows in grey below them."""
    import matplotlib  # lazy: plotting only here

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: plotting only here

    rows = [row for row in rows if row.get("weighted") is not None]  # a row without all three phases has no bar
    labels = [row["label"] for row in rows] + [f"published: {name}" for name in PUBLISHED]
    weighted = [row["weighted"] for row in rows] + [values[3] for values in PUBLISHED.values()]
    phases = [[phase["score"] for phase in row["phases"]] for row in rows] + [list(v[:3]) for v in PUBLISHED.values()]
    colours = ["tab:blue"] * len(rows) + ["0.6"] * len(PUBLISHED)
    figure, axes = plt.subplots(figsize=(9, 0.45 * len(labels) + 1.2))
    positions = list(range(len(labels)))[::-1]
    axes.barh(positions, weighted, color=colours, height=0.6)
    for position, scores in zip(positions, phases, strict=True):
        axes.scatter(scores, [position] * len(scores), color="black", s=12, zorder=3)
    for position, value, scores in zip(positions, weighted, phases, strict=True):
        axes.text(max(value, *scores) + 0.008, position, f"{value:.3f}", va="center", fontsize=8)
    axes.set_yticks(positions, labels, fontsize=8)
    axes.set_xlim(0.5, 1.1)
    axes.axvline(1.0, color="0.3", linewidth=0.8)
    axes.set_xlabel("score (ratio to no battery; lower is better): bar weighted 0.2/0.3/0.5, dots phases 1-3")
    axes.set_title("CityLearn 2022 data, published protocol:\nthis project (blue) beside the published table (grey)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _reward_kind(key: str) -> str:
    """The env and reward a run's returns are in (their units differ, so each gets its own panel): one building on
    the twin (4 evaluation windows) or the central CityLearn env (2 windows), and the reward."""
    env = "one building" if "_building" in key else "central"
    for kind in ("quadratic", "relative", "residual"):
        if kind in key:
            return f"{env}, {kind}"
    return f"{env}, absolute"


def _plot_curves(path: Path, folder: Path, agents: Sequence[dict[str, Any]]) -> None:
    """Each agent run's evaluation return against its frames (``curves/<key>.csv``, copied from its run), one panel
    per reward (absolute, relative to no battery, residual): the learning curves beside the table."""
    import matplotlib  # lazy: plotting only here

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: plotting only here

    curves = {row["key"]: folder / f"{row['key']}.csv" for row in agents if (folder / f"{row['key']}.csv").exists()}
    if not curves:
        return
    kinds = [_reward_kind(key) for key in curves]
    panels = sorted(set(kinds), reverse=True)  # the per-building runs first
    figure, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.4), squeeze=False)
    for (key, csv_path), kind in zip(curves.items(), kinds, strict=True):
        with csv_path.open() as file:
            points = [(int(row["frames"]), float(row["episode_return"])) for row in csv.DictReader(file)]
        axis = axes[0][panels.index(kind)]
        axis.plot([frames for frames, _ in points], [value for _, value in points], marker="o", label=key)
        axis.set_title(f"reward: {kind}", fontsize=9)
        axis.set_xlabel("frames")
        axis.legend(fontsize=6, ncol=2 if len(curves) > 8 else 1)
    axes[0][0].set_ylabel("evaluation return (the run's fixed windows)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def seed_summary(agents: Sequence[dict[str, Any]]) -> list[str]:
    """The agents' runs with every phase scored, grouped by agent and problem: each phase's mean and the weighted
    score's mean, standard deviation (over seeds, ``ddof=1``) and range; what a reader compares with the
    references, one seed being no result."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in agents:
        if row.get("weighted") is not None:
            groups.setdefault(row["key"].rsplit("_s", 1)[0], []).append(row)
    if not groups:
        return []
    lines = ["", "Over seeds (the runs above with all three phases):", "",
             "| agent, problem | seeds | phase 1 | phase 2 | phase 3 | weighted mean | sd | min - max |",
             "|:---|---:|---:|---:|---:|---:|---:|:---|"]  # fmt: skip
    for name, runs in sorted(groups.items()):
        phases = [statistics.fmean(run["phases"][index]["score"] for run in runs) for index in range(len(PHASES))]
        weighted = [run["weighted"] for run in runs]
        spread = f"{statistics.stdev(weighted):.3f}" if len(weighted) > 1 else "-"
        lines.append(
            f"| {name} | {len(runs)} | "
            + " | ".join(f"{value:.3f}" for value in phases)
            + f" | **{statistics.fmean(weighted):.3f}** | {spread} | {min(weighted):.3f} - {max(weighted):.3f} |"
        )
    return lines


def _score_cells(row: dict[str, Any]) -> str:
    """The three phases' scores, ``-`` for a phase the row was not run on (an agent scored on phases 1-2 only)."""
    scores = {phase["phase"]: phase["score"] for phase in row["phases"]}
    return " | ".join(f"{scores[phase.name]:.3f}" if phase.name in scores else "-" for phase in PHASES)


def _cell(value: float | None, bold: bool = False) -> str:
    if value is None:
        return "-"
    return f"**{value:.3f}**" if bold else f"{value:.3f}"


def page(rows: Sequence[dict[str, Any]], agents: Sequence[dict[str, Any]], whole: bool, phases: Sequence[Phase]) -> str:
    """The results page: our rows beside the published ones, what each knows or trained on, and its cost."""
    lines = ["# CityLearn 2022 challenge data: the published protocol, our rows beside the published table", ""]
    if not whole:
        lines += [f"**A slice, not the benchmark**: each phase's first {phases[0].hours} hours only.", ""]
    lines += [
        "The measured data of CityLearn's 2022 challenge (`citylearn_challenge_2022_phase_all`, 17 homes in "
        "California, a 6.4 kWh battery each; copied in the package with its source and license: "
        "[dataset/README.md](../../iquitos_lightning/citylearn_2022/dataset/README.md)), scored by the protocol of "
        f"{SOURCE}: phase 1 = buildings 1-5, days 0-120 (weight 0.2); phase 2 = buildings 1-5, days 120-240 (0.3); "
        "phase 3 = buildings 1-17 except 12 and 15, days 240-365 (0.5). Score = (cost + emissions + grid) / 3, each "
        "a ratio to the same buildings without a battery; grid = the mean of ramping (upward steps), daily "
        "one-minus-load-factor, daily peak and all-time peak (CityLearn 2.2b0's `evaluate()`, which the published "
        "rows ran on; `iquitos_lightning/citylearn_2022/scoring.py`). The 2022 competition's metric (grid = ramping "
        "and monthly load factor only, as the published code records it) is in the `2022 metric` column. Every row "
        "runs in CityLearn 3.0.2 and acts on an hour knowing the data up to the hour before (2.2b0's order).",
        "",
        "| row | what it knows / trained on | phase 1 | phase 2 | phase 3 | weighted | 2022 metric | published "
        "counterpart (weighted) | minutes, 2-core CPU |",
        "|:---|:---|---:|---:|---:|---:|---:|:---|---:|",
    ]
    for row in [*rows, *agents]:
        counterpart = row.get("counterpart")
        published = f"{counterpart} ({PUBLISHED[counterpart][3]:.3f})" if counterpart in PUBLISHED else "-"
        knows = row["knows"] if row.get("trained_on", "").startswith("nothing") else row["trained_on"]
        lines.append(
            f"| {row['label']} | {knows} | {_score_cells(row)} | {_cell(row.get('weighted'), bold=True)} | "
            f"{_cell(row.get('weighted_2022'))} | {published} | {row['minutes']} |"
        )
    if agents:
        lines += [
            "",
            "Agent rows (`agents.json`): each run's deterministic policy replayed by the same protocol; the column "
            "says what it trained on (never a scored building-hour); its minutes are training plus scoring on one "
            "core beside other runs. A phase it was not scored on is `-`, and a row without all three phases has no "
            "weighted score.",
            *seed_summary(agents),
        ]
    lines += ["", "The published table (weighted; phases 1 / 2 / 3):", "",
              "| published row | phase 1 | phase 2 | phase 3 | weighted |", "|:---|---:|---:|---:|---:|"]  # fmt: skip
    for name, values in PUBLISHED.items():
        lines.append(f"| {name} | " + " | ".join(f"{value:.3f}" for value in values) + " |")
    lines += [
        "",
        "![weighted scores](weighted_scores.png)",
        "",
        "*Each row's weighted score (bar) and its three phases (dots); the published rows in grey.*",
        "",
        *(
            [
                "![learning curves](learning_curves.png)",
                "",
                "*The agents' evaluation returns while training (fixed windows of their training rows).*",
                "",
            ]
            if agents
            else []
        ),
        "## Made by",
        "",
    ]
    commands = sorted({row["command"] for row in rows})
    revisions = sorted({row["revision"] for row in rows})
    lines += [f"- `{command}`" for command in commands]
    lines += [f"- at revision {', '.join(f'`{revision}`' for revision in revisions)}", ""]
    lines += [
        "Files: `scores.csv` (every row, phase and KPI), `scores.json` (the same with what each row knows, its "
        "command and revision), `weighted_scores.png`; `agents.json` holds the agents' rows when they have run. "
        "What the rows are, the calibration against the published LP and what differs: "
        "[docs/citylearn-2022.md](../../docs/citylearn-2022.md).",
        "",
    ]
    return "\n".join(lines)
