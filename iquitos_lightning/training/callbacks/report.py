"""The run report: after ``fit`` and ``test``, a folder a person can open to see how the run went.

Why: a user training for hours wants, afterwards and without W&B, the answer to "did it learn, and
how does the policy run the site?". At the end of ``fit`` and of ``test`` this callback writes to
``<logger root>/report/`` (``runs/<name>/report/`` with the project's configs):

- ``kpis.md`` / ``kpis.json``: the agent's KPI row of the last evaluation, in the reference table's format;
- ``learning_curve.png``: training and evaluation episode return over env frames, and the CO2 KPI
  of each evaluation when the env is the Iquitos site;
- ``health.png`` / ``health.csv``: the learning's health signals per rollout (``health/*`` of what each
  ``training_step`` returns: KL, explained variance, policy scale, Q statistics, ...) under the evaluation
  return, when the module returns any;
- ``dispatch_week.png``: a typical week of the last evaluation episode (PV, mall load, EV charging,
  BESS power and SOC, grid import), Iquitos site only;
- ``daily_profile.png``: the same episode's average day, hour by hour (BESS power with the band of its middle half
  of days, grid import, SOC): whether the policy keeps the battery for the evening, at a glance;
- ``summary.md``: what ran, for how long, how fast, and the figures above.

After ``test`` it also writes the agent's KPI row to ``<logger root>/kpis.json`` (the file ``compare``
and the README's output table name): the only writer of that file, and the one that removes it when a
``fit`` starts, since the weights trained from then on are no longer the ones it describes.

The same KPI table (after each evaluation) and the plots go into every W&B logger of the run. The
history is part of the callback's checkpoint state, so a resumed run's curve starts at frame 0.

What it reads: the counters of :class:`~iquitos_lightning.agents.contract.FrameCounting` from the LightningModule,
the KPI row and evaluation flows from the trainer's
:class:`~iquitos_lightning.training.callbacks.evaluation.PolicyEvaluation`, and the logged metrics
``val/episode_return``, ``test/episode_return`` and ``<stage>/kpi/<name>``. On another module, or without that
callback, the report holds what there is (a return curve, or only the summary).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.utilities import rank_zero_info

from iquitos_lightning.agents.contract import FrameCounting, frames_done
from iquitos_lightning.agents.selection import SELECTION_METRIC
from iquitos_lightning.report.run_report import SELECTION_SCORE, write_kpi_row, write_run_report
from iquitos_lightning.training.callbacks.evaluation import policy_evaluation

KPI_ROW_FILE = "kpis.json"  # <logger root>/kpis.json: the agent's KPI row after `test`
HEALTH_PREFIX = "health/"


def logger_root(trainer: pl.Trainer) -> Path:
    """``<logger root>``: the run's folder, holding the CSV log and the checkpoints (``runs/<name>``)."""
    logger = trainer.logger
    root = getattr(logger, "root_dir", None) if logger is not None else None  # not every logger has one
    return Path(root or trainer.default_root_dir)


def report_dir(trainer: pl.Trainer) -> Path:
    """``<logger root>/report``: beside the CSV log and the checkpoints (``runs/<name>/report``)."""
    return logger_root(trainer) / "report"


class RunReport(pl.Callback):
    """Writes the report folder at the end of ``fit`` and ``test`` (module docstring)."""

    def __init__(self, dirpath: str | None = None, dispatch_plot: bool = True, plots: bool = True) -> None:
        """``plots=False``: the report's tables, KPI rows and summary without its images (a sweep's runs, whose
        comparison draws its own plots; ~2-3 s of CPU less at the end of each fit); ``dispatch_plot=False``: the
        images but the dispatch week and daily profile."""
        self.dirpath = dirpath
        self.dispatch_plot = dispatch_plot
        self.plots = plots
        self.train_returns: list[tuple[int, float]] = []  # (frames, return of the last finished episode)
        self.evaluations: list[dict[str, float]] = []  # frames, episode_return and KPIs of each validation
        self.health: list[dict[str, float]] = []  # frames and the health/* signals of each rollout that has them
        self._episodes_seen = 0
        self._started = time.monotonic()
        self._frames_at_start = 0
        # The rows the last write drew (their counts: the lists only grow) and where: a ``test`` right after ``fit``
        # adds no row, so its report takes the fit's curves rather than drawing them again.
        self._curves_drawn: tuple[tuple[int, int, int], Path] | None = None

    # ----- observing ---------------------------------------------------------------------------------
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        stale = logger_root(trainer) / KPI_ROW_FILE
        if trainer.is_global_zero and stale.is_file():
            stale.unlink()
            rank_zero_info(f"removed {stale}: the KPI row of an earlier `test`, not of the weights trained now")
        self._started = time.monotonic()
        self._frames_at_start = frames_done(pl_module) or 0
        self._episodes_seen = pl_module.episodes_done if isinstance(pl_module, FrameCounting) else 0

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        frames = frames_done(pl_module)
        signals = health_signals(outputs)
        if signals:
            self.health.append({"frames": float(trainer.global_step if frames is None else frames), **signals})
        if not isinstance(pl_module, FrameCounting):
            return
        episodes, last_return = pl_module.episodes_done, pl_module.last_episode_return
        if last_return is None or episodes <= self._episodes_seen:
            return
        self._episodes_seen = int(episodes)
        self.train_returns.append((int(pl_module.frames_done), float(last_return)))

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        evaluation = self._stage_metrics(trainer, "val")
        if not evaluation:
            return
        frames = frames_done(pl_module)
        evaluation = {"frames": float(trainer.global_step if frames is None else frames), **evaluation}
        score = trainer.callback_metrics.get(SELECTION_METRIC)
        if score is not None:
            evaluation[SELECTION_SCORE] = float(score)
        self.evaluations.append(evaluation)
        self._log_kpi_table(trainer, "val", evaluation)

    # ----- writing -------------------------------------------------------------------------------------
    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        latest = self.evaluations[-1] if self.evaluations else {}
        self.write(trainer, pl_module, "fit", latest)

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        metrics = self._stage_metrics(trainer, "test")
        self._log_kpi_table(trainer, "test", metrics)
        self.write(trainer, pl_module, "test", metrics)
        evaluation = policy_evaluation(trainer)
        row = evaluation.test_kpi_row(pl_module) if evaluation is not None else None
        if row is not None:
            path = write_kpi_row(logger_root(trainer) / KPI_ROW_FILE, row)
            rank_zero_info(f"KPIs of {row['controller']} written to {path}")

    def write(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str, metrics: dict[str, float]) -> Path:
        """Write every file of the report for ``stage`` and return the folder."""
        folder = Path(self.dirpath) if self.dirpath else report_dir(trainer)
        evaluation = policy_evaluation(trainer)
        flows = evaluation.evaluation_flows() if self.plots and self.dispatch_plot and evaluation is not None else None
        rows = (len(self.train_returns), len(self.evaluations), len(self.health))
        drawn_in = self._curves_drawn[1] if self._curves_drawn is not None and self._curves_drawn[0] == rows else None
        paths = write_run_report(
            folder,
            stage=stage,
            controller=type(pl_module).__name__,
            counters=_counters(pl_module),
            elapsed_s=time.monotonic() - self._started,
            frames_this_run=(frames_done(pl_module) or 0) - self._frames_at_start,
            metrics=metrics,
            train_returns=self.train_returns,
            evaluations=self.evaluations,
            health=self.health,
            site_flows=flows,
            curves_drawn_in=drawn_in,
            plots=self.plots,
        )
        self._curves_drawn = (rows, folder)
        images = [path for path in paths if path.suffix == ".png"]
        for logger in _wandb_loggers(trainer):
            for image in images:  # one key per plot: W&B draws images of different sizes under one key badly
                logger.log_image(key=f"report/{stage}/{image.stem}", images=[str(image)])
        rank_zero_info(f"run report ({stage}) written to {folder}")
        return folder

    # ----- checkpoint state: a resumed run keeps its curve ----------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "train_returns": [list(point) for point in self.train_returns],
            "evaluations": [dict(evaluation) for evaluation in self.evaluations],
            "health": [dict(row) for row in self.health],
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.train_returns = [(int(frames), float(value)) for frames, value in state_dict.get("train_returns", [])]
        self.evaluations = [dict(evaluation) for evaluation in state_dict.get("evaluations", [])]
        self.health = [dict(row) for row in state_dict.get("health", [])]
        self._curves_drawn = None

    # ----- helpers -------------------------------------------------------------------------------------
    @staticmethod
    def _stage_metrics(trainer: pl.Trainer, stage: str) -> dict[str, float]:
        """``<stage>/episode_return`` and ``<stage>/kpi/*`` from the trainer's metrics, without the prefix."""
        prefix, kpi_prefix = f"{stage}/", f"{stage}/kpi/"
        metrics: dict[str, float] = {}
        for key, value in trainer.callback_metrics.items():
            if key.startswith(kpi_prefix):
                metrics[key[len(kpi_prefix) :]] = float(value)
            elif key == f"{prefix}episode_return":
                metrics["episode_return"] = float(value)
        return metrics

    @staticmethod
    def _log_kpi_table(trainer: pl.Trainer, stage: str, metrics: dict[str, float]) -> None:
        if not metrics:
            return
        columns = sorted(metrics)
        for logger in _wandb_loggers(trainer):
            logger.log_table(key=f"{stage}/kpi_table", columns=columns, data=[[metrics[name] for name in columns]])


def health_signals(outputs: Any) -> dict[str, float]:
    """The ``health/*`` entries of what a ``training_step`` returned, without the prefix."""
    if not isinstance(outputs, Mapping):
        return {}
    return {key[len(HEALTH_PREFIX) :]: float(value) for key, value in outputs.items() if key.startswith(HEALTH_PREFIX)}


def _wandb_loggers(trainer: pl.Trainer) -> list[WandbLogger]:
    return [logger for logger in trainer.loggers if isinstance(logger, WandbLogger)]


def _counters(pl_module: pl.LightningModule) -> dict[str, Any]:
    if not isinstance(pl_module, FrameCounting):
        return dict.fromkeys(("frames_done", "frame_budget", "updates_done", "episodes_done", "last_episode_return"))
    return {
        "frames_done": pl_module.frames_done,
        "frame_budget": pl_module.frame_budget,
        "updates_done": pl_module.updates_done,
        "episodes_done": pl_module.episodes_done,
        "last_episode_return": pl_module.last_episode_return,
    }
