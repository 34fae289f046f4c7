"""The final test of a ``fit``: the trained policy's year on CityLearn itself, run by the same command.

Why: the card's profiles train and evaluate at intervals on the twin (bit-equal to CityLearn, ~10x faster for a
year), but the figure a user reports is CityLearn's own. With ``final_test.backend: citylearn`` a ``fit`` that ran
to its budget ends with ``test`` on that simulator: the KPI row goes to ``<run>/kpis.json`` (the file ``compare``
and the README name) and its report to ``<run>/report/test-<backend>/``, beside the fit's report rather than over
it. A stopped run (Ctrl-C, SIGTERM) is not tested: ``fit --ckpt_path last`` resumes it and tests at its end.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl

from iquitos_lightning.agents import RLAgent
from iquitos_lightning.envs.env_config import BACKENDS, IQUITOS
from iquitos_lightning.envs.objectives import TARIFF
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.profile.devices import config_value
from iquitos_lightning.training.callbacks import BestCheckpoint, RunReport
from iquitos_lightning.training.callbacks.evaluation import policy_evaluation
from iquitos_lightning.training.callbacks.report import report_dir
from iquitos_lightning.training.reference_gap import OBJECTIVE_VALUE, RESULTS, reference_gap

FINAL, BEST = "final", "best"
POLICIES = (FINAL, BEST)


@dataclass
class FinalTest:
    """What ``fit`` runs once training has reached its budget."""

    backend: str | None = None  # "citylearn" or "twin": test the policy on this simulator (None: no test)
    # which policy: "final" (the weights at the end of the budget) or "best" (best.ckpt: the best evaluation on the
    # selection year, env.validation_site_seed; training/callbacks/best_checkpoint.py)
    policy: str = FINAL

    def __post_init__(self) -> None:
        if self.backend is not None and self.backend not in BACKENDS:
            raise ConfigError(f"final_test.backend must be one of {BACKENDS} or null, got {self.backend!r}")
        if self.policy not in POLICIES:
            raise ConfigError(f"final_test.policy must be one of {POLICIES}, got {self.policy!r}")


def refuse_best_without_selection(final_test: Any, model: Any) -> None:
    """``final_test.policy: best`` on a run without a selection year is refused before anything is built."""
    if getattr(final_test, "backend", None) is None or getattr(final_test, "policy", FINAL) != BEST:
        return
    env = config_value(config_value(model, "init_args") or {}, "env") or {}
    if config_value(env, "validation_site_seed") is None:
        raise ConfigError(
            "final_test.policy best tests the best evaluation on a selection year: set "
            "model.init_args.env.validation_site_seed (a site seed the run neither trains on nor reports), or use "
            "final_test.policy final"
        )


def best_checkpoint_path(trainer: pl.Trainer) -> str | None:
    """The file of the best evaluation on the selection year so far (None: no selection ran)."""
    for callback in trainer.callbacks:
        if isinstance(callback, BestCheckpoint) and callback.best_model_path:
            return callback.best_model_path
    return None


def run_final_test(trainer: pl.Trainer, model: pl.LightningModule, backend: str, policy: str = FINAL) -> bool:
    """``trainer.test`` on ``backend`` of the final policy, or of ``best.ckpt`` with ``policy="best"``, when the fit
    ran to its budget; True when it ran."""
    if not isinstance(model, RLAgent) or trainer.interrupted or model.frames_done < model.frame_budget:
        return False
    checkpoint = best_checkpoint_path(trainer) if policy == BEST else None
    if policy == BEST and checkpoint is None:
        print("final_test.policy best: no evaluation scored a selection year; testing the final policy", flush=True)
    trained = model.frames_done
    model.evaluate_on(backend)
    for callback in trainer.callbacks:
        if isinstance(callback, RunReport):
            folder = Path(callback.dirpath) if callback.dirpath else report_dir(trainer)
            callback.dirpath = str(folder / f"test-{backend}")
    which = f"the best policy on the selection year ({checkpoint})" if checkpoint else "the final policy"
    print(f"training reached its budget: testing {which} on {backend} (one evaluation year) ...", flush=True)
    trainer.test(model, ckpt_path=checkpoint, verbose=False)
    if checkpoint is not None:
        print(f"the tested policy is the one after {model.frames_done:,} of the {trained:,} frames trained", flush=True)
    row = tested_kpi_row(trainer, model)
    if row is not None:
        print(f"final test on {backend}: {final_figures(row)}", flush=True)
        env = model.env_config
        gap = gap_line(row, Path(env.site), env.objective) if env.name == IQUITOS else None
        if gap is not None:
            print(gap, flush=True)
    return True


def final_figures(row: dict) -> str:
    """The figures a user reports from a test's KPI row: return, bill (tariff runs) and EV energy unmet."""
    figures = [f"episode return {row['episode_return']:,.2f}"]
    if "tariff_cost" in row:
        figures.append(f"bill {row['tariff_cost']:,.0f} PEN (demand charge {row['demand_charge']:,.0f})")
    if "ev_unmet_kwh" in row:
        figures.append(f"EV energy unmet {row['ev_unmet_kwh']:,.0f} kWh")
    return ", ".join(figures)


def gap_line(
    row: dict, site: Path, objective: str, results: Path = RESULTS, *, compute_missing: bool = False
) -> str | None:
    """The test's share of the rule-to-optimum gap on ``objective``, as the line the final test prints; None where
    the year's references are not known (:func:`~iquitos_lightning.training.reference_gap.reference_gap`)."""
    gap = reference_gap(site, objective, results, compute_missing=compute_missing)
    if gap is None:
        return None
    what = OBJECTIVE_VALUE[objective][1]
    shown = ",.0f" if objective == TARIFF else ",.2f"
    return (
        f"{gap.closed_pct(row):.1f} % of the rule-to-optimum gap on {objective} (rule-based {what} "
        f"{gap.rule:{shown}}, optimum {gap.best:{shown}}: {gap.source})"
    )


def tested_kpi_row(trainer: pl.Trainer, model: Any) -> dict[str, Any] | None:
    """The agent's KPI row of the trainer's last ``test`` (None: not the site, or no evaluation callback)."""
    evaluation = policy_evaluation(trainer)
    return evaluation.test_kpi_row(model) if evaluation is not None and isinstance(model, RLAgent) else None


def print_test_figures(trainer: pl.Trainer, model: Any) -> None:
    """After ``test``: the bill and, on the Iquitos site, the gap against that year's references (any year of the
    profile: the references are computed when the year has no ``baselines.json``)."""
    row = tested_kpi_row(trainer, model)
    if row is None:
        return
    print(f"test on {model.env_config.backend.evaluate}: {final_figures(row)}", flush=True)
    env = model.env_config
    gap = gap_line(row, Path(env.site), env.objective, compute_missing=True) if env.name == IQUITOS else None
    if gap is not None:
        print(gap, flush=True)
