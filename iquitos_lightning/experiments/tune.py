"""The ``tune`` command: an Optuna search over a profile's hyperparameters, its trials run like ``compare``'s runs.

Why this shape:
- a trial is one ``fit`` of the profile with the trial's values as overrides, started by the same launcher as
  ``compare`` (:mod:`.launchers`: subprocesses here, or Ray tasks on a cluster) and resumable the same way
  (its ``last.ckpt``, written at every evaluation);
- the sampler is TPE, asked by this driver (``study.ask``: ``--jobs`` trials in flight), and the pruner is fed
  by the agents' own periodic evaluation (``--evaluations`` evenly spaced): each trial's ``fit`` reports its
  evaluations to the study and stops when pruned (:mod:`.pruning`);
- the study lives in a storage every worker reaches (a journal file, or an RDB URL on a cluster,
  :mod:`.study`); running the same command again resumes it: trials left running by an interrupted sitting
  continue from their checkpoints, finished and pruned ones are kept, and new ones are asked until the study
  holds ``--trials``;
- trials train and evaluate on the profile's simulator (the twin in the ``*_twin_cpu`` profiles: bit-equal to
  CityLearn and much faster); the best trial's checkpoint is then evaluated on CityLearn itself
  (``--final-eval citylearn``, the default) as the last word on the value the study reports;
- it writes the best config as a ready-to-use YAML (``configs/tuned/<search>.yaml``: the profile with the
  trials' site, budget and overrides and the best values), the study as a table (``tune_<study>.md|csv``) and
  plots (optimisation history, parameter importances) under ``results/<site>/``.

One driver runs a study at a time (the journal has no heartbeat to tell a live driver's running trials from an
interrupted one's); its trials are the workers that share the storage.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from iquitos_lightning.console import command_console
from iquitos_lightning.errors import INTERRUPTED_EXIT_CODE, TERMINATED_EXIT_CODE, ConfigError
from iquitos_lightning.experiments.compare import (
    FRAMES_PER_BATCH,
    RunOutcome,
    RunSpec,
    budget_and_period,
    git_revision,
    overrides_for,
    profile_objective,
    run_one,
    run_overrides,
    warmup_overrides,
)
from iquitos_lightning.experiments.launchers import Launcher, LauncherOptions
from iquitos_lightning.experiments.pruning import PRUNED_MARKER
from iquitos_lightning.experiments.search_space import SearchSpace, load_search_space
from iquitos_lightning.experiments.study import direction, make_pruner, open_storage
from iquitos_lightning.experiments.tune_report import (
    markdown_table,
    study_table,
    tuned_config,
    write_best_config,
    write_study_plots,
)
from iquitos_lightning.profile.bases import profile_yaml
from iquitos_lightning.report.comparison import objective_value
from iquitos_lightning.report.results_page import write_results_page
from iquitos_lightning.site.config import load_site_config

FINAL_EVALS = ("citylearn", "none")
INTERRUPTED = (INTERRUPTED_EXIT_CODE, TERMINATED_EXIT_CODE)
MAX_FAILED_IN_A_ROW = 3  # a config every trial fails with (a bad --override) must not ask trials for ever
PRUNING_CALLBACK = "iquitos_lightning.experiments.pruning.TrialPruning"
# Overrides that tie a trial's `fit` to its run folder and its study, not to what it trains (dropped from the tuned
# YAML and from the final evaluation, which writes elsewhere).
RUN_FOLDER_OPTIONS = (
    "--trainer.logger",
    "--checkpoint.dirpath",
    "--trainer.callbacks",
    "--trainer.enable_progress_bar",
)


class TuneError(ConfigError):
    """A ``tune`` argument that cannot work, or a study that was made with other settings."""


@dataclass(frozen=True)
class TuneSettings:
    """What a study is: the search space, where and how long each trial trains, and where everything goes."""

    search: Path
    site: Path
    trials: int
    frames: int
    evaluations: int = 4
    study: str | None = None  # default: <search>-<site>
    storage: str | None = None  # default: <runs>/<study>/study.journal
    runs: Path = Path("runs/tune")
    out: Path = Path("configs/tuned")
    results: Path = Path("results")
    seed: int = 0
    pruner: str = "median"
    startup_trials: int = 2
    final_eval: str = "citylearn"
    overrides: tuple[str, ...] = ()

    def record(self, space: SearchSpace) -> dict[str, Any]:
        """The settings a resumed study must share with the one on disk (trials, storage and outputs may change)."""
        return {
            "search": space.as_record(),
            "site": str(self.site),
            "frames": self.frames,
            "evaluations": self.evaluations,
            "seed": self.seed,
            "pruner": [self.pruner, self.startup_trials],
            "overrides": list(self.overrides),
        }


@dataclass
class Plan:
    """The trial runs' shared parts, computed once from the settings and the profile."""

    space: SearchSpace
    study_name: str
    storage: str
    objective: str
    budget: int
    period: int
    base_overrides: list[str] = field(default_factory=list)


def plan_study(settings: TuneSettings) -> Plan:
    """Check the settings and derive what every trial shares (budget, evaluation period, fixed overrides)."""
    if settings.trials < 1 or settings.frames < 1 or settings.evaluations < 1:
        raise TuneError(
            f"--trials, --frames and --evaluations must be positive "
            f"(got {settings.trials}, {settings.frames}, {settings.evaluations})"
        )
    if settings.final_eval not in FINAL_EVALS:
        raise TuneError(f"--final-eval {settings.final_eval!r}: choose from {', '.join(FINAL_EVALS)}")
    make_pruner(settings.pruner, settings.startup_trials)  # refuses an unknown pruner before anything runs
    space = load_search_space(settings.search)
    site_name = load_site_config(settings.site).name
    profile = profile_yaml(space.profile)
    init_args = profile["model"]["init_args"]
    agent = str(profile["model"]["class_path"]).rsplit(".", 1)[-1].lower()
    fixed = overrides_for(agent, list(settings.overrides))
    objective = profile_objective(space.profile, fixed)
    direction(objective)  # refuses an objective the study cannot rank
    per_batch = int(fixed.get(FRAMES_PER_BATCH, init_args["rollout"]["frames_per_batch"]))
    budget, period = budget_and_period(settings.frames, per_batch, settings.evaluations)
    study_name = settings.study or f"{space.name}-{site_name}"
    storage = settings.storage or str(settings.runs / study_name / "study.journal")
    base = warmup_overrides(agent, init_args, budget) + [f"--checkpoint.every_n_frames={period}"]
    base += [f"--{key}={value}" for key, value in fixed.items()]
    return Plan(space, study_name, storage, objective, budget, period, base)


def trial_dir(settings: TuneSettings, plan: Plan, number: int) -> Path:
    """The run folder of trial ``number``: ``<runs>/<study>/trial-NNNN``."""
    return settings.runs / plan.study_name / f"trial-{number:04d}"


def trial_spec(settings: TuneSettings, plan: Plan, number: int, values: dict[str, Any]) -> RunSpec:
    """The ``fit`` run of trial ``number`` with the trial's ``values`` (by parameter name)."""
    run_dir = trial_dir(settings, plan, number)
    pruning = {
        "class_path": PRUNING_CALLBACK,
        "init_args": {
            "storage": plan.storage,
            "study_name": plan.study_name,
            "trial_number": number,
            "objective": plan.objective,
            "pruner": settings.pruner,
            "startup_trials": settings.startup_trials,
            "marker": str(run_dir / PRUNED_MARKER),
        },
    }
    overrides = run_overrides(settings.site, settings.seed, plan.budget, plan.period, run_dir) + plan.base_overrides
    overrides += [param.override(values[param.name]) for param in plan.space.params]
    overrides.append(f"--trainer.callbacks+={json.dumps(pruning)}")
    return RunSpec(f"trial-{number:04d}", settings.seed, plan.space.profile, run_dir, plan.budget, tuple(overrides))


def run_trial(spec: RunSpec, threads: int) -> RunOutcome:
    """One trial's ``fit`` (or its resumption), on whatever node the launcher chose; ``pruned`` when its
    pruning marker is there (written by the trial's own :class:`~.pruning.TrialPruning`)."""
    marker = spec.run_dir / PRUNED_MARKER
    seconds = 0.0  # a trial pruned in an earlier sitting is not run again
    if not marker.exists():
        outcome = run_one(spec, threads)
        if not marker.exists():
            return outcome
        seconds = outcome.seconds
    return RunOutcome(spec, "pruned", seconds, kpis=json.loads(marker.read_text()))


def run_tune(settings: TuneSettings, launcher: LauncherOptions, console: Console | None = None) -> int:
    """The whole command: open or resume the study, run trials until it holds ``--trials``, write the outputs.

    Returns the exit status: 0, or 130/143 when interrupted (the study resumes with the same command).
    """
    # lazy: optuna is needed by `tune` only
    import optuna

    console = console or command_console()
    plan = plan_study(settings)
    launcher.check()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = open_storage(plan.storage)
    study = optuna.create_study(
        study_name=plan.study_name,
        storage=storage,
        pruner=make_pruner(settings.pruner, settings.startup_trials),
        direction=direction(plan.objective),
        load_if_exists=True,
    )
    _check_same_settings(study, settings.record(plan.space), plan.study_name)
    # Seeded by the trials already there: a resumed sitting's fresh sampler would otherwise draw its random start
    # again from the first value (checked: a fresh seed-0 sampler drew trial 0's values for trial 2), and the same
    # history still gives the same draws.
    study.sampler = optuna.samplers.TPESampler(seed=settings.seed + len(study.trials))
    console.print(f"[bold]Study {plan.study_name}[/] ({plan.storage}): {len(study.trials)} trial(s) so far")
    try:
        with launcher.make() as pool:
            interrupted = _run_trials(study, settings, plan, pool, console)
    except KeyboardInterrupt:
        interrupted = True
    if interrupted:
        console.print("interrupted: the study and its running trials resume with the same command")
        return INTERRUPTED_EXIT_CODE
    best = _best_trial(study)
    final = _final_evaluation(settings, plan, best, console) if best and settings.final_eval != "none" else None
    _write_outputs(study, settings, plan, best, final, console)
    return 0


def _write_outputs(
    study: Any, settings: TuneSettings, plan: Plan, best: Any, final: dict[str, Any] | None, console: Console
) -> None:
    """The study table and plots under ``results/<site>/``, and the best config under ``--out``."""
    site_name = load_site_config(settings.site).name
    stem = settings.results / site_name / f"tune_{plan.study_name}"
    stem.parent.mkdir(parents=True, exist_ok=True)
    table = study_table(study)
    table.to_csv(stem.with_suffix(".csv"))
    summary = _summary_lines(study, settings, plan, best, final)
    markdown = f"# Study `{plan.study_name}`\n\n" + "".join(f"- {line}\n" for line in summary)
    stem.with_suffix(".md").write_text(markdown + "\n" + markdown_table(table))
    plots = write_study_plots(study, stem)
    write_results_page(stem.parent)
    console.print(markdown_table(table), markup=False, soft_wrap=True)
    console.print(f"Wrote {stem}.md, .csv" + "".join(f", {path.name}" for path in plots))
    if best is None:
        console.print("[bold red]no trial completed: no tuned config written[/]")
        return
    spec = trial_spec(settings, plan, best.number, best.params)
    kept = [arg for arg in spec.overrides if not arg.startswith(RUN_FOLDER_OPTIONS)]
    config = tuned_config(plan.space.profile, kept, f"tuned-{plan.study_name}")
    header = ["Tuned by `python -m iquitos_lightning tune` (iquitos_lightning/experiments/tune.py):", *summary]
    header.append(f"Use: python -m iquitos_lightning fit --config {settings.out / (plan.space.name + '.yaml')}")
    path = write_best_config(settings.out / f"{plan.space.name}.yaml", config, header)
    console.print(f"best trial {best.number}: {plan.objective} {best.value:,.4f}; its config: {path}")


def _summary_lines(
    study: Any, settings: TuneSettings, plan: Plan, best: Any, final: dict[str, Any] | None
) -> list[str]:
    """How the study was made and what it found, for the table's page and the tuned YAML's header."""
    states = study_table(study)["state"].value_counts().to_dict() if study.trials else {}
    lines = [
        f"search space {settings.search}, profile {plan.space.profile}, site {settings.site}, objective "
        f"{plan.objective} ({direction(plan.objective)})",
        f"{plan.budget:,} frames per trial, evaluated every {plan.period:,}; pruner {settings.pruner} "
        f"(after {settings.startup_trials} trials); TPE seed {settings.seed} (+ trials before each sitting); trials: "
        + ", ".join(f"{count} {state}" for state, count in sorted(states.items())),
        f"storage {plan.storage}, study {plan.study_name}, git commit {git_revision()}",
    ]
    if best is not None:
        lines.append(f"best trial {best.number}: {plan.objective} {best.value:,.4f} on the profile's simulator")
        lines.append("best values: " + ", ".join(f"{name}={value}" for name, value in best.params.items()))
    if final is not None:
        value = objective_value(final, plan.objective, agent=True)
        lines.append(f"best trial's checkpoint evaluated on CityLearn: {plan.objective} {value:,.4f}")
    return lines


def _comparable(key: str, value: Any) -> Any:
    """A setting as resuming compares it: the search space's profile by its file name, so a study made before the
    profile moved to ``configs/experiments/<objective>/`` resumes with the moved file."""
    if key == "search" and isinstance(value, dict) and "profile" in value:
        return {**value, "profile": Path(str(value["profile"])).name}
    return value


def _check_same_settings(study: Any, record: dict[str, Any], name: str) -> None:
    on_disk = study.user_attrs.get("settings")
    if on_disk is None:
        study.set_user_attr("settings", record)
        return
    changed = sorted(key for key in record if _comparable(key, on_disk.get(key)) != _comparable(key, record[key]))
    if changed:
        raise TuneError(
            f"study {name!r} was made with other {', '.join(changed)}: resume it with the same settings, "
            "or start another with --study NEW_NAME"
        )


def _run_trials(study: Any, settings: TuneSettings, plan: Plan, pool: Launcher[Any, Any], console: Console) -> bool:
    """Trials until the study holds ``--trials`` finished ones (running ones of an earlier sitting first);
    True when a trial's ``fit`` was interrupted (the driver stops and leaves the study resumable)."""
    # lazy: optuna is needed by `tune` only
    from optuna.trial import TrialState

    train: Callable[[RunSpec], RunOutcome] = functools.partial(run_trial, threads=pool.resources.cpus)
    resumed = [trial for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))]
    finished = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
    in_flight: dict[Any, int] = {}
    interrupted = False
    failed_in_a_row: list[int] = []

    def more_to_start() -> bool:
        stop = interrupted or len(failed_in_a_row) >= MAX_FAILED_IN_A_ROW
        return not stop and bool(resumed or finished + len(in_flight) < settings.trials)

    while in_flight or more_to_start():
        while len(in_flight) < pool.jobs and more_to_start():
            if resumed:
                number, values = resumed[0].number, resumed.pop(0).params
                console.print(f"trial {number}: resumed from an earlier sitting")
            else:
                trial = study.ask()
                number, values = trial.number, {param.name: param.suggest(trial) for param in plan.space.params}
            handle = pool.submit(train, trial_spec(settings, plan, number, values))
            in_flight[handle] = number
        done, _ = pool.wait_any(list(in_flight))
        for handle, outcome in done:
            number = in_flight.pop(handle)
            if outcome.status == "failed" and outcome.returncode in INTERRUPTED:
                interrupted = True  # left RUNNING: the next sitting resumes it from its checkpoint
                continue
            counted = _tell(study, number, outcome, plan.objective, console)
            finished += counted
            failed_in_a_row = [] if counted else [*failed_in_a_row, number]
    if len(failed_in_a_row) >= MAX_FAILED_IN_A_ROW:
        logs = ", ".join(str(trial_dir(settings, plan, number) / "compare.log") for number in failed_in_a_row)
        raise TuneError(f"{len(failed_in_a_row)} trials failed in a row; the study stops here (logs: {logs})")
    return interrupted


def _tell(study: Any, number: int, outcome: RunOutcome, objective: str, console: Console) -> int:
    """Record a trial's end in the study; 1 when it counts towards ``--trials`` (completed or pruned)."""
    # lazy: optuna is needed by `tune` only
    from optuna.trial import TrialState

    seconds = f" in {outcome.seconds / 60:.1f} min" if outcome.seconds else ""
    if outcome.status == "pruned":
        study.tell(number, state=TrialState.PRUNED)
        console.print(f"[dim]trial {number}: pruned at {outcome.kpis.get('frames', '?')} frames{seconds}[/]")
        return 1
    if outcome.status == "failed":
        study.tell(number, state=TrialState.FAIL)
        console.print(f"[bold red]trial {number}: failed{seconds}[/]")
        console.print(outcome.log, markup=False)
        return 0
    value = objective_value(outcome.kpis, objective, agent=True)
    study.tell(number, value)
    console.print(f"[green]trial {number}: {objective} {value:,.4f}{seconds}[/]")
    return 1


def _best_trial(study: Any) -> Any:
    """The best completed trial, or None when none completed (all pruned or failed)."""
    # lazy: optuna is needed by `tune` only
    from optuna.trial import TrialState

    return study.best_trial if study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) else None


def _final_evaluation(settings: TuneSettings, plan: Plan, best: Any, console: Console) -> dict[str, Any] | None:
    """The best trial's last checkpoint evaluated on CityLearn (``test``): its KPI row, or None when it failed.

    Kept beside the trial (``trial-<n>-citylearn/``) and reused when there, so a resumed study does not pay twice.
    """
    spec = trial_spec(settings, plan, best.number, best.params)
    folder = spec.run_dir.with_name(f"{spec.run_dir.name}-citylearn")
    report = folder / "report" / "kpis.json"
    if report.exists():
        return json.loads(report.read_text())
    console.print(f"best trial {best.number}: evaluating its checkpoint on CityLearn ...")
    overrides = [arg for arg in spec.overrides if not arg.startswith(RUN_FOLDER_OPTIONS)]
    overrides += [
        f"--trainer.logger.init_args.save_dir={folder.parent}",
        f"--trainer.logger.init_args.name={folder.name}",
        f"--checkpoint.dirpath={folder / 'checkpoints'}",
        "--model.init_args.env.backend.evaluate=citylearn",
        "--trainer.enable_progress_bar=false",
        f"--ckpt_path={spec.last_checkpoint}",
    ]
    command = [sys.executable, "-m", "iquitos_lightning", "test", "--config", str(spec.profile_path), *overrides]
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "tune.log").open("a") as log:
        code = _run_logged(command, log)
    if code != 0 or not report.exists():
        console.print(f"[bold red]the CityLearn evaluation of trial {best.number} failed: see {folder / 'tune.log'}[/]")
        return None
    return json.loads(report.read_text())


def _run_logged(command: list[str], log: Any) -> int:
    log.write("$ " + " ".join(command) + "\n")
    log.flush()
    return subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
