"""The ``compare`` command: train each agent for each seed, evaluate on the full year, tabulate against the references.

Why a command and not a notebook: the thesis' table could never be trusted because nobody could
say which runs, seeds and budgets made it. Here one command line makes every run, and the JSON
beside the table records that command, the git revision, the seeds and the budgets.

How it runs:
- every (agent, seed) is one ``fit`` of the agent's training profile (``<agent>_<profile>.yaml`` in ``configs/``
  or, for the experiments' profiles, ``configs/experiments/<objective>/``: :mod:`.profiles`)
  in its own subprocess (isolated memory, crash contained, ``--jobs`` runs several at once), under
  ``<runs>/<site>/<agent>-seed<k>/``, with the site, seed and frame budget overridden; the launcher
  (:mod:`.launchers`: ``local`` threads here, or ``ray`` tasks on a cluster) only decides where that
  subprocess starts, so the table is the same whichever ran it;
- its last evaluation (one deterministic episode of the full year, on CityLearn or, with the profile's
  ``env.backend.evaluate: twin``, on the bit-equal twin) is its KPI row: the run report's ``kpis.json``.
  Validation runs ``--evaluations`` times, evenly spaced, the last at the end of the budget: the learning
  curves of the comparison (``report/evaluations.csv`` of each run);
- resumable: a run whose report shows the budget done is kept and skipped; an interrupted one
  resumes from its ``last.ckpt``. The command can run across several sittings;
- with ``--restarts K`` (and a selection year) each reported seed is the best of K training runs (seeds
  ``k*K`` to ``k*K+K-1``) on the selection year: what a practitioner does who trains a few and deploys the one
  that validates best, at K times the training (:func:`best_of_restarts`);
- one table per objective (the profiles' ``env.objective``): ``comparison_<objective>.md|csv|json``;
  agent entries are algorithms (``ppo``) or variants (``ppo_fleet``: the profile ``ppo_fleet_<profile>.yaml``);
- the references (uncontrolled, rule-based, tariff rule, MPC and LP optimum of the objective) come from
  ``results/<site>/baselines.json``,
  made by the ``baselines`` command when missing or made for another version of the site config.

Budget-derived settings: SAC's random warm-up (``init_random_frames``) is capped at a fifth of the
budget so a short budget still learns; this is recorded per run. Nothing is tuned on the evaluation year.
"""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from iquitos_lightning.console import command_console
from iquitos_lightning.control.reference_results import current_references
from iquitos_lightning.control.robust_mpc import load_settings
from iquitos_lightning.experiments.baselines import run_baselines
from iquitos_lightning.experiments.launchers import Launcher, LauncherOptions
from iquitos_lightning.experiments.profiles import EXPERIMENTS, find_profile, profile_files
from iquitos_lightning.profile.bases import profile_yaml
from iquitos_lightning.report.comparison import (
    EV_SERVICE_TOLERANCE,
    comparison_markdown,
    comparison_rows,
    objective_value,
    plot_learning_curves,
    plot_objective_and_co2_bars,
)
from iquitos_lightning.report.provenance import git_revision
from iquitos_lightning.report.results_page import write_results_page
from iquitos_lightning.report.run_report import SELECTION_SCORE
from iquitos_lightning.site.config import load_site_config
from iquitos_lightning.site.forecasts import FORECASTS, ORACLE, PAST_DAYS

AGENTS = ("sac", "ppo", "a2c")
SAC_WARMUP_SHARE = 5  # SAC random warm-up at most budget / 5


class CompareError(ValueError):
    """A ``compare`` argument that cannot work (unknown agent, missing profile, bad budget)."""


def algorithm_of(entry: str) -> str:
    """The algorithm of an ``--agents`` entry: ``ppo`` of ``ppo`` or of a variant such as ``ppo_fleet(+oracle)``."""
    return entry.partition("+")[0].split("_", 1)[0]


def split_entry(entry: str) -> tuple[str, str | None]:
    """An ``--agents`` entry as (profile entry, variant): ``sac_fleet+oracle`` is ``sac_fleet``'s profile trained
    and evaluated with ``env.forecasts=oracle`` (its own row: what perfect forecasts are worth); ``sac_fleet+hindsight``
    the same profile with ``env.training.critic_forecasts=oracle`` (its critic also sees the true coming hours in
    training; the actor, the deployed policy, still the profile's forecasts: envs/hindsight.py)."""
    base, plus, variant = entry.partition("+")
    if plus and variant not in (*FORECASTS, HINDSIGHT_VARIANT):
        kinds = ", ".join((*FORECASTS, HINDSIGHT_VARIANT))
        raise CompareError(f"--agents {entry!r}: after '+' comes a forecast kind or the critic's hindsight: {kinds}")
    return base, variant or None


@dataclass(frozen=True)
class RunSpec:
    """One training run of the comparison (``agent`` is the row: ``sac``, or a variant such as ``ppo_fleet``)."""

    agent: str
    seed: int
    profile_path: Path
    run_dir: Path
    frame_budget: int  # rounded up to whole rollouts of the profile
    overrides: tuple[str, ...]
    forecasts: str = PAST_DAYS  # what the agent knew of the coming hours (env.forecasts)
    train_site_seeds: tuple[int, ...] | None = None  # the site years it trained on (None: the evaluation year)
    starts_from: str = "scratch"  # "scratch", or the hand-written controller its residual acts around (env.residual)
    # the site year whose evaluations chose the reported policy (env.validation_site_seed; None: the final policy)
    selection_seed: int | None = None
    tested_on: str | None = None  # with a selection year: the simulator of the final test of best.ckpt
    restarts: int = 1  # training runs per reported seed: the one that scored best on the selection year is reported

    @property
    def name(self) -> str:
        return f"{self.agent}-seed{self.seed}"

    @property
    def reported_seed(self) -> int:
        """The table's seed this run is one try of (``seed // restarts``; the seed itself without restarts)."""
        return self.seed // self.restarts

    @property
    def report_json(self) -> Path:
        """The run's KPI row: the fit's last evaluation, or with a selection year the test of ``best.ckpt``."""
        if self.tested_on is not None:
            return self.run_dir / "report" / f"test-{self.tested_on}" / "kpis.json"
        return self.run_dir / "report" / "kpis.json"

    @property
    def last_checkpoint(self) -> Path:
        return self.run_dir / "checkpoints" / "last.ckpt"

    def finished(self) -> bool:
        """True when the run's report shows its whole budget trained and evaluated."""
        if not self.report_json.exists():
            return False
        row = json.loads(self.report_json.read_text())
        if self.tested_on is not None:  # a final test runs only once the budget is trained (final_evaluation.py)
            return row.get("stage") == "test" and "co2_kg" in row
        return int(row.get("frames_done") or 0) >= self.frame_budget and "co2_kg" in row


@dataclass
class RunOutcome:
    spec: RunSpec
    status: str  # "kept" (finished before), "trained", "failed" (tune adds "pruned")
    seconds: float = 0.0
    log: str = ""
    kpis: dict[str, Any] = field(default_factory=dict)
    returncode: int | None = None  # the fit's exit status (130/143: interrupted, resumable), None when not run


def profile_path(agent: str, profile: str, configs: Path = Path("configs")) -> Path:
    """The training profile ``<agent>_<profile>.yaml``: in ``configs/``, else the one in ``configs/experiments/*/``."""
    name = f"{agent}_{profile}.yaml"
    found = find_profile(configs, name)
    if len(found) > 1:
        raise CompareError(f"training profile {name} is in several folders ({', '.join(map(str, found))}): keep one")
    if not found:
        prefix = f"{agent}_"
        choices = sorted({p.stem.removeprefix(prefix) for p in profile_files(configs, f"{prefix}*.yaml")})
        raise CompareError(
            f"no training profile {name} for agent {agent!r} in {configs}/ or {configs}/{EXPERIMENTS}/*/; "
            f"its profiles: {', '.join(choices) or 'none'}"
        )
    return found[0]


FRAMES_PER_BATCH = "model.init_args.rollout.frames_per_batch"


def parse_frames(text: str, agents: list[str]) -> dict[str, int]:
    """``--frames``: one budget for every agent (``8760``) or one per agent (``sac=43800,ppo=1000000``); a variant
    without its own (``ppo+oracle``) trains on its profile entry's (``ppo``): a rung of the ladder is the same run with
    one thing changed, its budget included."""
    try:
        if "=" not in text:
            return dict.fromkeys(agents, int(text))
        budgets = {name.strip(): int(value) for name, value in (part.split("=", 1) for part in text.split(","))}
    except ValueError as error:
        raise CompareError(f"--frames {text!r} is not N or agent=N,agent=N ({error})") from error
    for agent in agents:
        if agent not in budgets and split_entry(agent)[0] in budgets:
            budgets[agent] = budgets[split_entry(agent)[0]]
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
        if scope and algorithm_of(scope) not in AGENTS:
            raise CompareError(f"override {override!r} names unknown agent {scope!r}: choose from {', '.join(AGENTS)}")
        if scope in ("", agent, split_entry(agent)[0], algorithm_of(agent)):
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
    evaluations: int = 1,
    restarts: int = 1,
) -> list[RunSpec]:
    """The runs of a comparison, in order (agent by agent, seed by seed); ``frames`` is one budget or one per agent.
    With ``restarts`` K, ``seeds`` x K runs (training seeds 0 to seeds x K - 1), reported K at a time.

    An agent entry is an algorithm (``ppo``) or a variant of one (``ppo_fleet``: the profile
    ``ppo_fleet_<profile>.yaml``, found by :func:`profile_path`); runs go to
    ``<runs_root>/<site>/<objective>/<entry>-seed<k>`` where the objective is the profile's ``env.objective``
    (``thesis`` when unset)."""
    if evaluations < 1:
        raise CompareError(f"--evaluations must be 1 or more, got {evaluations}")
    if restarts < 1:
        raise CompareError(f"--restarts must be 1 or more, got {restarts}")
    unknown = [agent for agent in agents if algorithm_of(agent) not in AGENTS]
    if unknown:
        raise CompareError(f"unknown agent(s) {unknown}: choose from {', '.join(AGENTS)}")
    budgets = frames if isinstance(frames, dict) else dict.fromkeys(agents, frames)
    if seeds < 1 or min(budgets.values()) < 1:
        raise CompareError(f"--seeds and --frames must be positive (got {seeds}, {frames})")
    site_name = load_site_config(site_path).name
    specs = []
    for agent in agents:
        base, variant = split_entry(agent)
        path = profile_path(base, profile, configs)
        init_args = profile_yaml(path)["model"]["init_args"]
        agent_overrides = overrides_for(agent, extra_overrides or [])
        if variant == HINDSIGHT_VARIANT:
            agent_overrides[CRITIC_FORECASTS_KEY] = ORACLE
        elif variant:
            agent_overrides[FORECASTS_KEY] = variant
        per_batch = int(agent_overrides.get(FRAMES_PER_BATCH, init_args["rollout"]["frames_per_batch"]))
        budget, period = budget_and_period(budgets[agent], per_batch, evaluations)
        objective = profile_objective(path, agent_overrides)
        for seed in range(seeds * restarts):
            run_dir = runs_root / site_name / objective / f"{agent}-seed{seed}"
            overrides = run_overrides(site_path, seed, budget, period, run_dir) + warmup_overrides(
                agent, init_args, budget
            )
            overrides += [f"--{key}={value}" for key, value in agent_overrides.items()]
            information = str(env_setting(path, agent_overrides, "forecasts", PAST_DAYS))
            critic_sees = env_setting(path, agent_overrides, "training.critic_forecasts", None)
            if critic_sees not in (None, "null"):  # what its critic saw in training besides (envs/hindsight.py)
                information += f" (critic in training: {critic_sees})"
            years = env_setting(path, agent_overrides, "training.train_site_seeds", None)
            years = tuple(int(year) for year in yaml.safe_load(str(years))) if years not in (None, "null") else None
            residual = env_setting(path, agent_overrides, "residual", None)  # the controller it acts around
            prior = "scratch" if residual in (None, "null") else f"prior: {residual}"
            selection = env_setting(path, agent_overrides, "validation_site_seed", None)
            selection = None if selection in (None, "null") else int(selection)
            if restarts > 1 and selection is None:
                raise CompareError(
                    f"--restarts {restarts}: {agent} has no selection year (env.validation_site_seed) to choose among"
                    " its runs on; the reported year must not choose them"
                )
            tested_on = None if selection is None else profile_eval_backend(path, agent_overrides)
            if tested_on is not None:  # the row is best.ckpt's test, on the simulator the evaluations ran on
                overrides += [f"--final_test.backend={tested_on}", "--final_test.policy=best"]
            found = (information, years, prior, selection, tested_on)
            specs.append(RunSpec(agent, seed, path, run_dir, budget, tuple(overrides), *found, restarts=restarts))
    return specs


def selection_score(run_dir: Path) -> float:
    """A run's best selection-year score over its evaluations (what chose its ``best.ckpt``); -inf when none."""
    path = run_dir / "report" / "evaluations.csv"
    scores = pd.read_csv(path).get(SELECTION_SCORE) if path.exists() else None
    if scores is None or scores.dropna().empty:
        return -math.inf
    return float(scores.max())


def best_of_restarts(outcomes: list[RunOutcome]) -> list[RunOutcome]:
    """The finished runs the table reports: per agent and reported seed, the run whose best selection-year score is
    highest (each run its own seed without restarts). Why on the selection year: it is neither trained on nor
    reported, so choosing among runs there is the same early stopping as choosing among one run's evaluations,
    and its score ranks runs as the reported year does (Spearman 0.99 over fifteen thesis runs: docs/experiments.md)."""
    best: dict[tuple[str, int], tuple[float, RunOutcome]] = {}
    for outcome in outcomes:
        if not outcome.kpis:
            continue
        spec = outcome.spec
        key = (spec.agent, spec.reported_seed)
        score = selection_score(spec.run_dir) if spec.restarts > 1 else 0.0
        if key not in best or score > best[key][0]:
            best[key] = (score, outcome)
    return [outcome for _, outcome in best.values()]


def budget_and_period(frames: int, per_batch: int, evaluations: int) -> tuple[int, int]:
    """The frame budget rounded up to whole rollouts, and the evaluation period: ``evaluations`` evenly spaced, the
    last at the end of the budget, each a whole number of rollouts."""
    budget = math.ceil(frames / per_batch) * per_batch
    return budget, math.ceil(budget / evaluations / per_batch) * per_batch


def warmup_overrides(agent: str, init_args: dict[str, Any], budget: int) -> list[str]:
    """SAC's random warm-up capped at a fifth of the budget, so a short budget still learns (none for others)."""
    if algorithm_of(agent) != "sac":
        return []
    warmup = min(int(init_args.get("init_random_frames", 0)), budget // SAC_WARMUP_SHARE)
    return [f"--model.init_args.init_random_frames={warmup}"]


def run_overrides(site_path: Path, seed: int, budget: int, period: int, run_dir: Path) -> list[str]:
    """The ``fit`` overrides that make a profile one run of an experiment: site, seeds, budget, evaluation period
    (one episode each), every output (logs, report, checkpoints) under ``run_dir``, and no final test (a card
    profile's CityLearn year after fit): the experiment's row is the fit's last evaluation, on the profile's
    evaluation env (the twin's is bit-equal to CityLearn)."""
    return [
        f"--seed_everything={seed}",
        f"--model.init_args.env.site={site_path}",
        f"--model.init_args.env.episodes.seed={1000 * seed}",
        f"--model.init_args.rollout.frame_budget={budget}",
        f"--model.init_args.rollout.eval_every_frames={period}",
        "--model.init_args.rollout.eval_episodes=1",
        f"--trainer.logger.init_args.save_dir={run_dir.parent}",
        f"--trainer.logger.init_args.name={run_dir.name}",
        f"--checkpoint.dirpath={run_dir / 'checkpoints'}",
        "--trainer.enable_progress_bar=false",
        "--final_test.backend=null",
    ]


FORECASTS_KEY = "model.init_args.env.forecasts"
CRITIC_FORECASTS_KEY = "model.init_args.env.training.critic_forecasts"
HINDSIGHT_VARIANT = "hindsight"  # ``--agents <entry>+hindsight``: the entry with its critic's hindsight (split_entry)


def env_setting(path: Path, overrides: dict[str, str], name: str, default: Any) -> Any:
    """The profile's ``env.<name>`` as a run gets it (``name`` dotted in a group: ``backend.evaluate``): an override
    (``key`` or ``--key``) wins over the file."""
    key = f"model.init_args.env.{name}"
    for candidate in (key, f"--{key}"):
        if candidate in overrides:
            return overrides[candidate]
    value = profile_yaml(path)["model"]["init_args"].get("env") or {}
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return default
        value = value[part]
    return value


def profile_objective(path: Path, overrides: dict[str, str] | None = None) -> str:
    """The objective a profile trains on (an override of ``env.objective`` wins; ``thesis`` when unset)."""
    return str(env_setting(path, overrides or {}, "objective", "thesis"))


def profile_eval_backend(path: Path, overrides: dict[str, str]) -> str:
    """The simulator a run's evaluations ran on (``env.backend.evaluate``: ``citylearn`` when unset)."""
    return str(env_setting(path, overrides, "backend.evaluate", "citylearn"))


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
        return RunOutcome(spec, "failed", seconds, "\n".join(tail), returncode=result.returncode)
    return RunOutcome(spec, "trained", seconds, kpis=json.loads(spec.report_json.read_text()), returncode=0)


def run_all(specs: list[RunSpec], launcher: Launcher[RunSpec, RunOutcome], console: Console) -> list[RunOutcome]:
    """Every run through ``launcher`` (``jobs`` at a time), one progress bar over runs; outcomes in ``specs`` order."""
    train = functools.partial(run_one, threads=launcher.resources.cpus)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    outcomes: dict[int, RunOutcome] = {}
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("training runs", total=len(specs))
        for index, outcome in launcher.map_unordered(train, specs):
            outcomes[index] = outcome
            progress.advance(task)
            seconds = f" in {outcome.seconds / 60:.1f} min" if outcome.status == "trained" else ""
            style = {"failed": "bold red", "kept": "dim"}.get(outcome.status, "green")
            progress.console.print(f"[{style}]{outcome.spec.name}: {outcome.status}{seconds}[/]")
            if outcome.status == "failed":
                progress.console.print(outcome.log, markup=False)
    return [outcomes[index] for index in range(len(specs))]


def run_metadata(
    command: list[str], revision: str, specs: list[RunSpec], outcomes: list[RunOutcome], **settings: Any
) -> dict:
    """What the JSON records about how the table was made (``revision``: the code's, read when the command began)."""
    return {
        "command": "python -m iquitos_lightning " + " ".join(command),
        "git_revision": revision,
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


def learning_curve(run_dir: Path, objective: str) -> pd.DataFrame:
    """The run's evaluations during training (``report/evaluations.csv``): frames, the objective's value, CO2, cost,
    peak import; empty when the run wrote none."""
    path = run_dir / "report" / "evaluations.csv"
    if not path.exists():
        return pd.DataFrame(columns=["frames", "objective_value"])
    curve = pd.read_csv(path)
    curve["objective_value"] = [objective_value(row, objective, agent=True) for row in curve.to_dict("records")]
    return curve.sort_values("frames")


def reference_kpis(site_path: Path, results_root: Path, console: Console) -> dict[str, Any]:
    """``results/<site>/baselines.json`` of this exact site config and tuned MPC, made by ``baselines`` when missing
    or stale (training's gap line reads only the rule's and the optimum's bills, so only the table checks the MPC)."""
    site_config = load_site_config(site_path)
    path = results_root / site_config.name / "baselines.json"
    made = current_references(results_root, site_config)
    if made is not None and made_with_the_tuned_mpc(made):
        return made
    why = "no reference table for this site config" if made is None else "its mpc_robust ran other knobs than the tuned"
    console.print(f"[bold]{path}: {why}: running `baselines` first[/]")
    run_baselines(site_path, results_root, console=console)
    return json.loads(path.read_text())


def made_with_the_tuned_mpc(made: dict[str, Any]) -> bool:
    """True when a ``baselines.json``'s ``mpc_robust_tariff`` row ran the knobs of ``configs/tuned/`` as they are now
    (a re-tune changes that row and nothing else)."""
    return made.get("mpc_robust_settings") == asdict(load_settings())


def run_compare(
    site_path: Path,
    agents: list[str],
    seeds: int,
    frames: int | dict[str, int],
    profile: str,
    results_root: Path,
    runs_root: Path,
    launcher: LauncherOptions,
    extra_overrides: list[str],
    command: list[str],
    console: Console | None = None,
    evaluations: int = 1,
    restarts: int = 1,
    test_years: tuple[int, ...] = (),
) -> Path:
    """The whole command: references, runs, aggregation, outputs. Returns ``results/<site>/``. With ``test_years``
    it ends with every reference and each run's ``best.ckpt`` on those years (experiments/unseen_years.py).

    The references are made (when missing) before the launcher starts: a Ray cluster is joined only for the runs.
    """
    console = console or command_console()
    # the code the runs train with, read before anything is written: the command's own pages (tracked in git) would
    # mark the tree changed, and a commit made while the runs train is not the code they ran
    revision = git_revision()
    plan = {"evaluations": evaluations, "restarts": restarts}
    specs = plan_runs(site_path, agents, seeds, frames, profile, runs_root, extra_overrides, **plan)
    objectives = {spec.run_dir.parent.name for spec in specs}
    if len(objectives) != 1:
        raise CompareError(f"the agents' profiles train on different objectives ({sorted(objectives)}): one table each")
    objective = objectives.pop()
    if test_years and (objective != "tariff" or any(spec.selection_seed is None for spec in specs)):
        raise CompareError(
            "--test-years tests best.ckpt on the tariff objective: every profile needs objective tariff and a "
            "selection year (env.validation_site_seed)"
        )
    launcher.check()  # a bad --launcher/--address is refused before the references are made
    references = reference_kpis(site_path, results_root, console)
    with launcher.make() as pool:
        outcomes = run_all(specs, pool, console)
    failed = [outcome.spec.name for outcome in outcomes if outcome.status == "failed"]

    reported = best_of_restarts(outcomes)
    runs_by_agent: dict[str, list[dict[str, Any]]] = {agent: [] for agent in agents}
    for outcome in reported:
        runs_by_agent[outcome.spec.agent].append(outcome.kpis)
    unavoidable = float(references["ev_unmet_unavoidable_kwh"])
    table = comparison_rows(references["kpis"], runs_by_agent, unavoidable, objective)
    evaluation_seed = load_site_config(site_path).seed
    add_information_columns(table, specs, evaluation_seed)

    site_name = references["site"]
    out_dir = results_root / site_name
    out_dir.mkdir(parents=True, exist_ok=True)
    currency = references.get("currency", "PEN")
    markdown = comparison_markdown(table, currency)
    settings = {"site": site_name, "objective": objective, "agents": agents, "seeds": list(range(seeds))}
    settings |= {"frames_requested": frames, "profile": profile, "extra_overrides": extra_overrides}
    settings["failed_runs"] = failed
    settings["restarts"] = restarts
    settings["reported_runs"] = [outcome.spec.name for outcome in reported]
    settings["evaluation_site_seed"] = evaluation_seed
    first_overrides = dict(override.split("=", 1) for override in specs[0].overrides)
    settings["eval_backend"] = profile_eval_backend(specs[0].profile_path, first_overrides)
    metadata = run_metadata(command, revision, specs, outcomes, **settings)
    stem = f"comparison_{objective}"
    (out_dir / f"{stem}.md").write_text(_comparison_report(markdown, metadata, references, table))
    table.to_csv(out_dir / f"{stem}.csv")
    curves = {spec.name: learning_curve(spec.run_dir, objective) for spec in specs}
    summary = {**metadata, "table": json.loads(table.to_json(orient="index")), "per_run": _per_run(outcomes)}
    summary["curves"] = {name: json.loads(curve.to_json(orient="records")) for name, curve in curves.items()}
    (out_dir / f"{stem}.json").write_text(json.dumps(summary, indent=2) + "\n")
    curves_png, bars_png = out_dir / f"learning_curves_{objective}.png", out_dir / f"objective_co2_{objective}.png"
    drawn = {name: curve for name, curve in curves.items() if len(curve)}
    shown = {outcome.spec.name for outcome in reported} if restarts > 1 else None
    plot_learning_curves(
        drawn, curves_png, title=f"{site_name}, {objective}:", references=table, currency=currency, reported=shown
    )
    plot_objective_and_co2_bars(table, bars_png, currency=currency, title=f"site {site_name}, objective {objective}")
    console.print(markdown, markup=False, soft_wrap=True)
    write_results_page(out_dir)
    console.print(f"Wrote {out_dir}/ ({stem}.md, .csv, .json, {curves_png.name}, {bars_png.name}, README.md)")
    if failed:
        raise CompareError(f"{len(failed)} run(s) failed: {', '.join(failed)} (logs: <run>/compare.log)")
    if test_years:
        # lazy: the test years' module loads the MPCs and, for the agents, torch
        from iquitos_lightning.experiments.unseen_years import run_test_years

        run_test_years(
            site_path, list(agents), tuple(test_years), runs_root, results_root, command, console, revision=revision
        )
    return out_dir


# What each reference row knows of the coming hours (control/: the rules react to the hour now; tariff_rule and
# mpc_forecast plan with the past-days forecasts the agents see by default; mpc_perfect and the LP see the truth).
REFERENCE_INFORMATION = {
    "uncontrolled": "-",
    "rule_based": "the hour now",
    "tariff_rule": PAST_DAYS,
    "mpc_forecast": PAST_DAYS,
    "mpc_robust": f"{PAST_DAYS}, hedged",
    "mpc_perfect": "oracle",
    "optimum": "oracle (whole year)",
}


def trained_on(spec: RunSpec, evaluation_seed: int) -> str:
    """The site years (seeds) a run trained on, said plainly when one of them is the evaluation year."""
    chosen = "" if spec.selection_seed is None else f"; chosen on {spec.selection_seed}"
    if spec.restarts > 1:
        chosen += f" among {spec.restarts} runs"
    if spec.train_site_seeds is None:
        return f"{evaluation_seed} (the evaluation year){chosen}"
    years = ", ".join(str(seed) for seed in spec.train_site_seeds)
    return years + (" (incl. the evaluation year)" if evaluation_seed in spec.train_site_seeds else "") + chosen


def add_information_columns(table: pd.DataFrame, specs: list[RunSpec], evaluation_seed: int) -> None:
    """``information`` (what the row knew of the coming hours), ``trained_on`` (site seeds) and ``starts_from``
    (``scratch`` or the hand-written prior a residual agent acts around) for every row."""
    information: dict[str, str] = {}
    years: dict[str, str] = {}
    starts: dict[str, str] = {}
    for name in table.index:
        kind = next((key for key in REFERENCE_INFORMATION if str(name).startswith(key)), None)
        if kind is not None:
            information[name], years[name], starts[name] = REFERENCE_INFORMATION[kind], "-", "-"
    for spec in specs:
        information[spec.agent] = spec.forecasts
        years[spec.agent] = trained_on(spec, evaluation_seed)
        starts[spec.agent] = spec.starts_from
    table["information"] = [information.get(name, "?") for name in table.index]
    table["trained_on"] = [years.get(name, "?") for name in table.index]
    table["starts_from"] = [starts.get(name, "?") for name in table.index]


def _per_run(outcomes: list[RunOutcome]) -> dict[str, dict[str, Any]]:
    return {outcome.spec.name: outcome.kpis for outcome in outcomes if outcome.kpis}


def _comparison_report(markdown: str, metadata: dict, references: dict, table: pd.DataFrame) -> str:
    budgets = ", ".join(sorted({f"{run['agent']} {run['frame_budget']:,}" for run in metadata["runs"]}))
    not_served = [str(name) for name, served in table["ev_served"].items() if not served]
    restarts = metadata.get("restarts", 1)
    seeds = f"seeds {metadata['seeds']}"
    if restarts > 1:
        seeds += (
            f", each the best of {restarts} training runs on the selection year ({restarts} x the training; "
            f"reported: {', '.join(metadata['reported_runs'])}; every run's KPIs in the JSON's `per_run`)"
        )
    objective = metadata["objective"]
    simulator = (
        "the twin (bit-equal to CityLearn: tests/envs/test_twin.py)"
        if metadata.get("eval_backend") == "twin"
        else "CityLearn"
    )
    lines = [
        f"# Agents against the references: site `{metadata['site']}`, objective `{objective}`",
        "",
        f"Made by `{metadata['command']}` at git revision `{metadata['git_revision']}`; "
        f"{seeds}; training frames per run: {budgets}; profile `{metadata['profile']}`.",
        "",
        markdown,
        f"- References (from `baselines.json`, every row through the EV guarantee): `uncontrolled`, `rule_based`, "
        f"`tariff_rule` (rule-based + night BESS charge and flat peak-window import, previous-days forecasts), "
        f"`mpc_forecast_{objective}` / `mpc_perfect_{objective}` (24 h LP of this objective re-solved hourly, "
        f"previous-days / perfect forecasts), `mpc_robust_tariff` (the practitioner's MPC: the past days' worst "
        f"mall load and PV plus a tuned margin), `optimum_{objective}` (the perfect-foresight LP of this objective).",
        f"- Every row is evaluated on site seed {metadata.get('evaluation_site_seed', '?')} (the reported year); "
        "`trained on` gives the site years (seeds of the same profile: mall noise, cloudiness and EV sessions "
        "drawn afresh) each agent trained on, `knew ahead` what it saw of the coming hours' PV and mall load "
        "(`past_days`: the mean of the same hour on the previous 3 days, what a site has; `oracle`: the true "
        "series; `critic in training: oracle`: its critic also saw the true series while it trained, the policy "
        "acts on the forecasts named first). Prices and the calendar are a published schedule, known to every "
        "row. `chosen on N`: the row's policy is the run's evaluation that scored best on site seed N (a year it "
        "neither trained on nor reports: `best.ckpt`, tested on the reported year); other rows report the policy "
        "at the end of the budget.",
        f"- Agents: mean ± std over seeds of one deterministic evaluation episode of the full year on {simulator}.",
        "- Gap closed = (value - rule_based) / (optimum - rule_based) on this objective: 0 % is the rule-based "
        "controller, 100 % the optimum, below 0 worse than the rule.",
        f"- EVs served: unmet EV energy at most the unavoidable {references['ev_unmet_unavoidable_kwh']:,.0f} kWh "
        f"(need beyond charger x dwell) plus {100 * EV_SERVICE_TOLERANCE:g} % of the rule-based EV energy served.",
        f"- Learning curves: `learning_curves_{objective}.png` (each run's evaluations during training).",
    ]
    if not_served:
        lines.append(f"- **EV service not met by: {', '.join(not_served)}**.")
    return "\n".join(lines) + "\n"
