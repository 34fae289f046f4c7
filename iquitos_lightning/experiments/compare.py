"""The ``compare`` command: train each agent for each seed, evaluate on the full year, tabulate against the references.

Why a command and not a notebook: the thesis' table could never be trusted because nobody could
say which runs, seeds and budgets made it. Here one command line makes every run, and the JSON
beside the table records that command, the git revision, the seeds and the budgets.

How it runs:
- every (agent, seed) is one ``fit`` of the agent's training profile (``configs/<agent>_<profile>.yaml``)
  in its own subprocess (isolated memory, crash contained, ``--jobs`` runs several at once), under
  ``<runs>/<site>/<agent>-seed<k>/``, with the site, seed and frame budget overridden;
- its last evaluation (one deterministic episode of the full year, on CityLearn) is its KPI row:
  the run report's ``kpis.json``. Validation runs once, at the end of the budget;
- resumable: a run whose report shows the budget done is kept and skipped; an interrupted one
  resumes from its ``last.ckpt``. The command can run across several sittings;
- the references (uncontrolled, rule-based, LP optimum) come from ``results/<site>/baselines.json``,
  made by the ``baselines`` command when missing or made for another version of the site config.

Budget-derived settings: SAC's random warm-up (``init_random_frames``) is capped at a fifth of the
budget so a short budget still learns; this is recorded per run. Nothing is tuned on the evaluation year.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from iquitos_lightning.control.baselines import run_baselines
from iquitos_lightning.report.comparison import (
    EV_SERVICE_TOLERANCE,
    comparison_markdown,
    comparison_rows,
    plot_co2_cost_bars,
    plot_learning_curves,
)
from iquitos_lightning.site.config import load_site_config

AGENTS = ("sac", "ppo", "a2c")
SAC_WARMUP_SHARE = 5  # SAC random warm-up at most budget / 5


class CompareError(ValueError):
    """A ``compare`` argument that cannot work (unknown agent, missing profile, bad budget)."""


@dataclass(frozen=True)
class RunSpec:
    """One training run of the comparison."""

    agent: str
    seed: int
    profile_path: Path
    run_dir: Path
    frame_budget: int  # rounded up to whole rollouts of the profile
    overrides: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.agent}-seed{self.seed}"

    @property
    def report_json(self) -> Path:
        return self.run_dir / "report" / "kpis.json"

    @property
    def last_checkpoint(self) -> Path:
        return self.run_dir / "checkpoints" / "last.ckpt"

    def finished(self) -> bool:
        """True when the run's report shows its whole budget trained and evaluated."""
        if not self.report_json.exists():
            return False
        row = json.loads(self.report_json.read_text())
        return int(row.get("frames_done") or 0) >= self.frame_budget and "co2_kg" in row


@dataclass
class RunOutcome:
    spec: RunSpec
    status: str  # "kept" (finished before), "trained", "failed"
    seconds: float = 0.0
    log: str = ""
    kpis: dict[str, Any] = field(default_factory=dict)


def profile_path(agent: str, profile: str, configs: Path = Path("configs")) -> Path:
    path = configs / f"{agent}_{profile}.yaml"
    if not path.exists():
        choices = sorted(p.stem.split("_", 1)[1] for p in configs.glob(f"{agent}_*.yaml"))
        raise CompareError(f"no training profile {path} for agent {agent!r}; profiles there: {', '.join(choices)}")
    return path


FRAMES_PER_BATCH = "model.init_args.rollout.frames_per_batch"


def parse_frames(text: str, agents: list[str]) -> dict[str, int]:
    """``--frames``: one budget for every agent (``8760``) or one per agent (``sac=43800,ppo=1000000``)."""
    try:
        if "=" not in text:
            return dict.fromkeys(agents, int(text))
        budgets = {name.strip(): int(value) for name, value in (part.split("=", 1) for part in text.split(","))}
    except ValueError as error:
        raise CompareError(f"--frames {text!r} is not N or agent=N,agent=N ({error})") from error
    missing = [agent for agent in agents if agent not in budgets]
    if missing:
        raise CompareError(f"--frames {text!r} gives no budget for {', '.join(missing)}")
    return {agent: budgets[agent] for agent in agents}


def overrides_for(agent: str, overrides: list[str]) -> dict[str, str]:
    """The ``fit`` overrides that apply to ``agent``: ``key=value`` for all agents, ``agent:key=value`` for one."""
    applicable: dict[str, str] = {}
    for override in overrides:
        scope, _, setting = override.rpartition(":") if ":" in override.split("=", 1)[0] else ("", "", override)
        key, equals, value = setting.lstrip("-").partition("=")
        if not equals or not key:
            raise CompareError(f"override {override!r} is not [agent:]key=value")
        if scope and scope not in AGENTS:
            raise CompareError(f"override {override!r} names unknown agent {scope!r}: choose from {', '.join(AGENTS)}")
        if scope in ("", agent):
            applicable[key] = value
    return applicable


def plan_runs(
    site_path: Path,
    agents: list[str],
    seeds: int,
    frames: int | dict[str, int],
    profile: str,
    runs_root: Path,
    extra_overrides: list[str] | None = None,
    configs: Path = Path("configs"),
) -> list[RunSpec]:
    """The runs of a comparison, in order (agent by agent, seed by seed); ``frames`` is one budget or one per agent."""
    unknown = [agent for agent in agents if agent not in AGENTS]
    if unknown:
        raise CompareError(f"unknown agent(s) {unknown}: choose from {', '.join(AGENTS)}")
    budgets = frames if isinstance(frames, dict) else dict.fromkeys(agents, frames)
    if seeds < 1 or min(budgets.values()) < 1:
        raise CompareError(f"--seeds and --frames must be positive (got {seeds}, {frames})")
    site_name = load_site_config(site_path).name
    specs = []
    for agent in agents:
        path = profile_path(agent, profile, configs)
        init_args = yaml.safe_load(path.read_text())["model"]["init_args"]
        agent_overrides = overrides_for(agent, extra_overrides or [])
        per_batch = int(agent_overrides.get(FRAMES_PER_BATCH, init_args["rollout"]["frames_per_batch"]))
        budget = math.ceil(budgets[agent] / per_batch) * per_batch
        for seed in range(seeds):
            run_dir = runs_root / site_name / f"{agent}-seed{seed}"
            overrides = [
                f"--seed_everything={seed}",
                f"--model.init_args.env.site={site_path}",
                f"--model.init_args.env.seed={1000 * seed}",
                f"--model.init_args.rollout.frame_budget={budget}",
                f"--model.init_args.rollout.eval_every_frames={budget}",
                "--model.init_args.rollout.eval_episodes=1",
                f"--trainer.logger.init_args.save_dir={run_dir.parent}",
                f"--trainer.logger.init_args.name={run_dir.name}",
                f"--checkpoint.dirpath={run_dir / 'checkpoints'}",
                "--trainer.enable_progress_bar=false",
            ]
            if agent == "sac":
                warmup = min(int(init_args.get("init_random_frames", 0)), budget // SAC_WARMUP_SHARE)
                overrides.append(f"--model.init_args.init_random_frames={warmup}")
            overrides += [f"--{key}={value}" for key, value in agent_overrides.items()]
            specs.append(RunSpec(agent, seed, path, run_dir, budget, tuple(overrides)))
    return specs


def run_one(spec: RunSpec, threads: int) -> RunOutcome:
    """Train (or resume) one run in a subprocess; its output goes to ``<run>/compare.log``."""
    if spec.finished():
        return RunOutcome(spec, "kept", kpis=json.loads(spec.report_json.read_text()))
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "iquitos_lightning", "fit", "--config", str(spec.profile_path), *spec.overrides]
    if spec.last_checkpoint.exists():
        command.append(f"--ckpt_path={spec.last_checkpoint}")
    environment = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    log_path = spec.run_dir / "compare.log"
    started = time.monotonic()
    with log_path.open("a") as log:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()
        result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=environment, check=False)
    seconds = time.monotonic() - started
    if result.returncode != 0 or not spec.finished():
        tail = log_path.read_text().splitlines()[-15:]
        return RunOutcome(spec, "failed", seconds, "\n".join(tail))
    return RunOutcome(spec, "trained", seconds, kpis=json.loads(spec.report_json.read_text()))


def run_all(specs: list[RunSpec], jobs: int, console: Console) -> list[RunOutcome]:
    """Every run, ``jobs`` at a time, with one progress bar over runs."""
    jobs = max(1, min(jobs, len(specs)))
    threads = max(1, (os.cpu_count() or 1) // jobs)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    outcomes: list[RunOutcome] = []
    with Progress(*columns, console=console) as progress, ThreadPoolExecutor(jobs) as pool:
        task = progress.add_task("training runs", total=len(specs))
        for outcome in pool.map(lambda spec: run_one(spec, threads), specs):
            outcomes.append(outcome)
            progress.advance(task)
            seconds = f" in {outcome.seconds / 60:.1f} min" if outcome.status == "trained" else ""
            style = {"failed": "bold red", "kept": "dim"}.get(outcome.status, "green")
            progress.console.print(f"[{style}]{outcome.spec.name}: {outcome.status}{seconds}[/]")
            if outcome.status == "failed":
                progress.console.print(outcome.log, markup=False)
    return outcomes


def git_revision() -> str:
    """The commit the code ran at (``+dirty`` when the tree has changes), or ``unknown`` outside git."""
    try:
        revision = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
        return revision.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_metadata(command: list[str], specs: list[RunSpec], outcomes: list[RunOutcome], **settings: Any) -> dict:
    """What the JSON records about how the table was made."""
    return {
        "command": "python -m iquitos_lightning " + " ".join(command),
        "git_revision": git_revision(),
        **settings,
        "runs": [
            {
                **{key: str(value) if isinstance(value, Path) else value for key, value in asdict(o.spec).items()},
                "status": o.status,
                "seconds": round(o.seconds, 1),
            }
            for o in outcomes
        ],
    }


def learning_curve(run_dir: Path) -> pd.DataFrame:
    """``frames`` and ``episode_return`` of every finished training episode, over all versions of a run's CSV log."""
    parts = []
    for metrics in sorted(run_dir.glob("version_*/metrics.csv")):
        log = pd.read_csv(metrics)
        if {"train/episode_return", "progress/frames_done"} <= set(log.columns):
            rows = log.dropna(subset=["train/episode_return", "progress/frames_done"])
            parts.append(rows[["progress/frames_done", "train/episode_return"]])
    if not parts:
        return pd.DataFrame(columns=["frames", "episode_return"])
    curve = pd.concat(parts).set_axis(["frames", "episode_return"], axis=1)
    return curve.drop_duplicates("frames", keep="last").sort_values("frames")


def reference_kpis(site_path: Path, results_root: Path, console: Console) -> dict[str, Any]:
    """``results/<site>/baselines.json`` of this exact site config, made by ``baselines`` when missing or stale."""
    site_config = load_site_config(site_path)
    path = results_root / site_config.name / "baselines.json"
    if path.exists() and json.loads(path.read_text()).get("site_config_hash") == site_config.content_hash():
        return json.loads(path.read_text())
    console.print(f"[bold]No reference table for this site config at {path}: running `baselines` first[/]")
    run_baselines(site_path, results_root, console=console)
    return json.loads(path.read_text())


def run_compare(
    site_path: Path,
    agents: list[str],
    seeds: int,
    frames: int | dict[str, int],
    profile: str,
    results_root: Path,
    runs_root: Path,
    jobs: int,
    extra_overrides: list[str],
    command: list[str],
    console: Console | None = None,
) -> Path:
    """The whole command: references, runs, aggregation, outputs. Returns ``results/<site>/``."""
    console = console or Console()
    specs = plan_runs(site_path, agents, seeds, frames, profile, runs_root, extra_overrides)
    references = reference_kpis(site_path, results_root, console)
    outcomes = run_all(specs, jobs, console)
    failed = [outcome.spec.name for outcome in outcomes if outcome.status == "failed"]

    runs_by_agent: dict[str, list[dict[str, Any]]] = {agent: [] for agent in agents}
    for outcome in outcomes:
        if outcome.kpis:
            runs_by_agent[outcome.spec.agent].append(outcome.kpis)
    table = comparison_rows(references["kpis"], runs_by_agent, float(references["ev_unmet_unavoidable_kwh"]))

    site_name = references["site"]
    out_dir = results_root / site_name
    out_dir.mkdir(parents=True, exist_ok=True)
    currency = references.get("currency", "PEN")
    markdown = comparison_markdown(table, currency)
    settings = {"site": site_name, "agents": agents, "seeds": list(range(seeds)), "frames_requested": frames}
    settings |= {"profile": profile, "extra_overrides": extra_overrides, "failed_runs": failed}
    metadata = run_metadata(command, specs, outcomes, **settings)
    (out_dir / "comparison.md").write_text(_comparison_report(markdown, metadata, references, table))
    table.to_csv(out_dir / "comparison.csv")
    summary = {**metadata, "table": json.loads(table.to_json(orient="index")), "per_run": _per_run(outcomes)}
    (out_dir / "comparison.json").write_text(json.dumps(summary, indent=2) + "\n")
    curves = {spec.name: learning_curve(spec.run_dir) for spec in specs}
    plot_learning_curves({name: curve for name, curve in curves.items() if len(curve)}, out_dir / "learning_curves.png")
    plot_co2_cost_bars(table, out_dir / "co2_cost.png", currency=currency, title=f"site {site_name}")
    console.print(markdown, markup=False, soft_wrap=True)
    console.print(f"Wrote {out_dir}/ (comparison.md, .csv, .json, learning_curves.png, co2_cost.png)")
    if failed:
        raise CompareError(f"{len(failed)} run(s) failed: {', '.join(failed)} (logs: <run>/compare.log)")
    return out_dir


def _per_run(outcomes: list[RunOutcome]) -> dict[str, dict[str, Any]]:
    return {outcome.spec.name: outcome.kpis for outcome in outcomes if outcome.kpis}


def _comparison_report(markdown: str, metadata: dict, references: dict, table: pd.DataFrame) -> str:
    budgets = ", ".join(sorted({f"{run['agent']} {run['frame_budget']:,}" for run in metadata["runs"]}))
    not_served = [str(name) for name, served in table["ev_served"].items() if not served]
    lines = [
        f"# Agents against the references: site `{metadata['site']}`",
        "",
        f"Made by `{metadata['command']}` at git revision `{metadata['git_revision']}`; "
        f"seeds {metadata['seeds']}; training frames per run: {budgets}; profile `{metadata['profile']}`.",
        "",
        markdown,
        "- References: `uncontrolled` (every socket at full power, BESS idle), `rule_based`, `optimum` (the "
        "perfect-foresight LP replayed through CityLearn): from `baselines.json`.",
        "- Agents: mean ± std over seeds of one deterministic evaluation episode of the full year on CityLearn, "
        "after training on the same year (there is no separate test year: the table measures control quality "
        "on the year the agent was trained on, as the references do).",
        "- CO2 gap closed = (CO2 uncontrolled - CO2 agent) / (CO2 uncontrolled - CO2 optimum).",
        f"- EVs served: unmet EV energy at most the unavoidable {references['ev_unmet_unavoidable_kwh']:,.0f} kWh "
        f"(need beyond charger x dwell) plus {100 * EV_SERVICE_TOLERANCE:g} % of the rule-based EV energy served.",
    ]
    if not_served:
        lines.append(f"- **EV service not met by: {', '.join(not_served)}** (their CO2 is not comparable as is).")
    return "\n".join(lines) + "\n"
