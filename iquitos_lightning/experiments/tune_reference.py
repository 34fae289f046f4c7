"""The ``tune-reference`` command: the practitioner's MPC tuned on the training years, as an agent's settings are.

Why: an agent's hyperparameters are searched on its training years and chosen on a selection year; a reference
with hand-set knobs (or knobs set by reading the reported year) is either weaker or luckier than it should be. Here
the knobs of ``mpc_robust`` (control/robust_mpc.py: horizon, days of the past-days box, mall and PV margins) are
searched by Optuna's TPE over the site years the card's agents train on (seeds 2030-2033), scored by the mean share
of each year's rule-to-optimum bill gap the MPC closes, on the twin. The first trial is the hand-set hedge (so the
search can only keep or beat it); a trial whose running mean falls below the median of earlier trials after a year is
pruned. No test year and no development year is read.

Resumable: the study lives in a journal file (``runs/tune-reference/<study>.journal``) and each year's rule and
optimum bills beside it; running the same command again continues until the study holds ``--trials`` trials.

Writes ``configs/tuned/mpc_robust_tariff.yaml`` (the best knobs, with the command, years and score as comments; the
reference table reads it) and ``results/<site>/tune_mpc_robust_tariff.md|csv`` with the optimisation history plot.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from iquitos_lightning.atomic_files import write_atomically
from iquitos_lightning.console import command_console
from iquitos_lightning.control.robust_mpc import TUNED_SETTINGS, RobustMPCController, RobustSettings
from iquitos_lightning.control.site_years import OPTIMUM, RULE, gap_closed, gap_ends, run_year, year_before, year_env
from iquitos_lightning.envs.objectives import TARIFF
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.experiments.study import make_pruner, open_storage
from iquitos_lightning.experiments.tune_report import markdown_table, study_table, write_study_plots
from iquitos_lightning.report.provenance import git_revision
from iquitos_lightning.report.results_page import write_results_page
from iquitos_lightning.site.config import load_site_config

TRAINING_YEARS = (2030, 2031, 2032, 2033)  # the card profiles' train_site_seeds
STUDY = "mpc_robust_tariff"
SEARCH_SPACE = {
    "horizon": [24, 36],
    "envelope_days": (1, 7),
    "mall_margin": (0.0, 0.20),
    "pv_margin": (0.0, 0.30),
}


@dataclass
class ReferenceTuneSettings:
    site: Path
    trials: int = 8
    years: tuple[int, ...] = TRAINING_YEARS
    seed: int = 0
    startup_trials: int = 3
    runs: Path = Path("runs/tune-reference")
    results: Path = Path("results")
    out: Path = TUNED_SETTINGS
    command: list[str] = field(default_factory=list)


def sample_settings(trial: Any) -> RobustSettings:
    """The trial's knobs from :data:`SEARCH_SPACE` (EV arrivals always planned: a site knows yesterday's)."""
    return RobustSettings(
        horizon=trial.suggest_categorical("horizon", SEARCH_SPACE["horizon"]),
        envelope_days=trial.suggest_int("envelope_days", *SEARCH_SPACE["envelope_days"]),
        mall_margin=trial.suggest_float("mall_margin", *SEARCH_SPACE["mall_margin"]),
        pv_margin=trial.suggest_float("pv_margin", *SEARCH_SPACE["pv_margin"]),
        plan_arrivals=True,
    )


def year_ends(settings: ReferenceTuneSettings, envs: dict[int, Any], console: Console) -> dict[int, dict[str, float]]:
    """Each training year's rule and optimum bills (the gap's ends), computed once and kept beside the study."""
    path = settings.runs / f"{STUDY}-year-ends.json"
    known = {int(seed): ends for seed, ends in json.loads(path.read_text()).items()} if path.is_file() else {}
    for seed, env in envs.items():
        if seed in known:
            continue
        rule, optimum = gap_ends(env, seed)
        known[seed] = {RULE: rule, OPTIMUM: optimum}
        console.print(f"year {seed}: rule {known[seed][RULE]:,.0f}, optimum {known[seed][OPTIMUM]:,.0f}")
        write_atomically((json.dumps(known, indent=2) + "\n").encode(), path, "tuning references")
    return known


def run_tune_reference(settings: ReferenceTuneSettings, console: Console | None = None) -> RobustSettings:
    """The whole command (module docstring); returns the best knobs."""
    import optuna  # lazy: only this command needs it

    console = console or command_console()
    if settings.trials < 1:
        raise ConfigError(f"--trials must be 1 or more, got {settings.trials}")
    site_config = load_site_config(settings.site)
    if site_config.seed in settings.years:
        raise ConfigError(f"--years includes {site_config.seed}, the site's own (reported) year: tune on other years")
    settings.runs.mkdir(parents=True, exist_ok=True)
    envs = {seed: year_env(settings.site, seed) for seed in settings.years}
    befores = {seed: year_before(env.site_config) for seed, env in envs.items()}
    ends = year_ends(settings, envs, console)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name=STUDY,
        storage=open_storage(str(settings.runs / f"{STUDY}.journal")),
        direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=settings.seed, n_startup_trials=settings.startup_trials),
        pruner=make_pruner("median", settings.startup_trials),
        load_if_exists=True,
    )
    if not study.trials:  # the hand-set hedge first: the search keeps it unless it finds better
        defaults = asdict(RobustSettings())
        study.enqueue_trial({name: defaults[name] for name in SEARCH_SPACE})
    rerun_cut_trials(study, console)

    def objective(trial: Any) -> float:
        knobs = sample_settings(trial)
        gaps = []
        for step, (seed, env) in enumerate(envs.items()):
            bill = run_year(env, RobustMPCController(env.series, TARIFF, knobs, befores[seed]), seed)
            gaps.append(gap_closed(bill.tariff_cost, ends[seed][RULE], ends[seed][OPTIMUM]))
            trial.set_user_attr(f"gap_{seed}", round(gaps[-1], 2))
            trial.set_user_attr(f"max_import_kw_{seed}", round(bill.max_import_kw, 1))
            trial.report(sum(gaps) / len(gaps), step)
            progress.advance(task)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return sum(gaps) / len(gaps)

    done = len(finished_trials(study))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("MPC years (trials x training years)", total=settings.trials * len(envs))
        progress.update(task, completed=done * len(envs))
        while len(finished_trials(study)) < settings.trials:
            study.optimize(objective, n_trials=1, catch=())
            last = study.trials[-1]
            value = "pruned" if last.value is None else f"{last.value:.1f} % of the gap"
            progress.console.print(f"trial {last.number}: {last.params} -> {value}")
    best = RobustSettings(**{**asdict(RobustSettings()), **study.best_params})
    _write_outputs(settings, study, best, site_config.name)
    console.print(f"best: {best.describe()}: {study.best_value:.1f} % of the gap on years {list(settings.years)}")
    return best


def finished_trials(study: Any) -> list[Any]:
    """The trials that count towards ``--trials``: completed or pruned (a failed one was cut short, not judged)."""
    from optuna.trial import TrialState  # lazy: only this command needs optuna

    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))


def rerun_cut_trials(study: Any, console: Console) -> None:
    """Trials an earlier sitting left running (the process stopped mid-trial: a session's end, a kill) are marked
    failed and their knobs queued again, so the study resumes them first instead of keeping a trial that never ends."""
    from optuna.trial import TrialState  # lazy: only this command needs optuna

    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(trial.number, state=TrialState.FAIL)
        study.enqueue_trial(trial.params)
        console.print(f"trial {trial.number}: cut short by an earlier sitting, queued again with its knobs")


def _write_outputs(settings: ReferenceTuneSettings, study: Any, best: RobustSettings, site: str) -> None:
    command = "python -m iquitos_lightning " + " ".join(settings.command)
    header = [
        "The practitioner's MPC (mpc_robust, control/robust_mpc.py), tuned on the training years.",
        f"made by: {command}",
        f"git commit: {git_revision()}",
        f"best of {len(study.trials)} Optuna trials, mean gap closed {study.best_value:.2f} % over site seeds "
        f"{list(settings.years)} (twin).",
    ]
    text = "".join(f"# {line}\n" for line in header) + yaml.safe_dump({"settings": asdict(best)}, sort_keys=False)
    write_atomically(text.encode(), settings.out, "tuned reference")
    out_dir = settings.results / site
    out_dir.mkdir(parents=True, exist_ok=True)
    table = study_table(study).drop(columns=["last_eval_frames"], errors="ignore")
    for trial in study.trials:
        for key, value in trial.user_attrs.items():
            table.loc[trial.number, key] = value
    table = table.rename(columns={"value": "mean_gap_pct"})
    stem = out_dir / f"tune_{STUDY}"
    write_atomically(table.to_csv().encode(), stem.with_suffix(".csv"), "tuning table")
    plots = write_study_plots(study, stem)
    lines = [
        f"# The practitioner's MPC tuned on the training years: site `{site}`",
        "",
        f"Made by `{command}`. Knobs of `mpc_robust` (control/robust_mpc.py) searched by TPE (seed {settings.seed}),"
        f" median pruning after {settings.startup_trials} trials; the value is the mean share of the rule-to-"
        f"optimum tariff gap closed over site seeds {list(settings.years)} (the agents' training years), on the "
        "twin. Trial 0 is the hand-set hedge. No development or test year was read.",
        "",
        f"Best: **{best.describe()}**: {study.best_value:.2f} % (written to `{settings.out}`).",
        "",
        markdown_table(table),
        *(f"![{path.stem}]({path.name})" for path in plots),
        "",
    ]
    write_atomically("\n".join(lines).encode(), stem.with_suffix(".md"), "tuning report")
    write_results_page(out_dir)
    if not math.isfinite(study.best_value):
        raise ConfigError("the study has no finished trial with a value")
