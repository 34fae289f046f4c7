"""The run report: after ``fit`` and ``test``, a folder a person can open to see how the run went.

Why: a user training for hours wants, afterwards and without W&B, the answer to "did it learn, and
how does the policy run the site?". At the end of ``fit`` and of ``test`` this callback writes to
``<logger root>/report/`` (``runs/<name>/report/`` with the project's configs):

- ``kpis.md`` / ``kpis.json``: the agent's KPI row of the last evaluation, in the reference table's format;
- ``learning_curve.png``: training and evaluation episode return over env frames, and the CO2 KPI
  of each evaluation when the env is the Iquitos site;
- ``dispatch_week.png``: a typical week of the last evaluation episode (PV, mall load, EV charging,
  BESS power and SOC, grid import), Iquitos site only;
- ``summary.md``: what ran, for how long, how fast, and the figures above.

The same KPI table (after each evaluation) and the plots go into every W&B logger of the run. The
history is part of the callback's checkpoint state, so a resumed run's curve starts at frame 0.

Contract with the LightningModule (all optional, read with ``getattr``): the counters of
:mod:`iquitos_lightning.training.callbacks.step_rate`, ``eval_env`` (an env made by
:func:`iquitos_lightning.envs.factory.make_env`), and the logged metrics
``val/episode_return``, ``test/episode_return`` and ``<stage>/kpi/<name>``. On another module the
report holds what there is (a return curve, or only the summary).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.utilities import rank_zero_info


def report_dir(trainer: pl.Trainer) -> Path:
    """``<logger root>/report``: beside the CSV log and the checkpoints (``runs/<name>/report``)."""
    logger = trainer.logger
    root = getattr(logger, "root_dir", None) if logger is not None else None
    return Path(root or trainer.default_root_dir) / "report"


class RunReport(pl.Callback):
    """Writes the report folder at the end of ``fit`` and ``test`` (module docstring)."""

    def __init__(self, dirpath: str | None = None, dispatch_plot: bool = True) -> None:
        self.dirpath = dirpath
        self.dispatch_plot = dispatch_plot
        self.train_returns: list[tuple[int, float]] = []  # (frames, return of the last finished episode)
        self.evaluations: list[dict[str, float]] = []  # frames, episode_return and KPIs of each validation
        self._episodes_seen = 0
        self._started = time.monotonic()
        self._frames_at_start = 0

    # ----- observing ---------------------------------------------------------------------------------
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._started = time.monotonic()
        self._frames_at_start = int(getattr(pl_module, "frames_done", 0) or 0)
        self._episodes_seen = int(getattr(pl_module, "episodes_done", 0) or 0)

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        episodes = getattr(pl_module, "episodes_done", None)
        last_return = getattr(pl_module, "last_episode_return", None)
        if episodes is None or last_return is None or episodes <= self._episodes_seen:
            return
        self._episodes_seen = int(episodes)
        self.train_returns.append((int(getattr(pl_module, "frames_done", 0)), float(last_return)))

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        evaluation = self._stage_metrics(trainer, "val")
        if not evaluation:
            return
        evaluation = {"frames": float(getattr(pl_module, "frames_done", trainer.global_step)), **evaluation}
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

    def write(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str, metrics: dict[str, float]) -> Path:
        """Write every file of the report for ``stage`` and return the folder."""
        from iquitos_lightning.report.run_report import write_run_report

        folder = Path(self.dirpath) if self.dirpath else report_dir(trainer)
        flows = _site_flows(pl_module) if self.dispatch_plot else None
        paths = write_run_report(
            folder,
            stage=stage,
            controller=type(pl_module).__name__,
            counters=_counters(pl_module),
            elapsed_s=time.monotonic() - self._started,
            frames_this_run=int(getattr(pl_module, "frames_done", 0) or 0) - self._frames_at_start,
            metrics=metrics,
            train_returns=self.train_returns,
            evaluations=self.evaluations,
            site_flows=flows,
        )
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
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.train_returns = [(int(frames), float(value)) for frames, value in state_dict.get("train_returns", [])]
        self.evaluations = [dict(evaluation) for evaluation in state_dict.get("evaluations", [])]

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


def _wandb_loggers(trainer: pl.Trainer) -> list[WandbLogger]:
    return [logger for logger in trainer.loggers if isinstance(logger, WandbLogger)]


def _counters(pl_module: pl.LightningModule) -> dict[str, Any]:
    names = ("frames_done", "frame_budget", "updates_done", "episodes_done", "last_episode_return")
    return {name: getattr(pl_module, name, None) for name in names}


def _site_flows(pl_module: pl.LightningModule) -> tuple[Any, int] | None:
    """The last evaluation episode's flow table and its calendar year, when the module evaluates on the site."""
    try:
        from iquitos_lightning.envs.factory import site_env

        site = site_env(pl_module.eval_env)  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        return None
    if site is None:
        return None
    flows = site.flows()
    if flows is None or len(flows) == 0:
        return None
    return flows, int(site.site_config.calendar.year)
