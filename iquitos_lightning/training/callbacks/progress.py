"""A rich progress bar for RL runs: frames against the frame budget, fps, ETA, last return and memory.

Why: Lightning's bar counts dataloader batches, which in RL are rollouts of any size, and its
"it/s" and time-left say nothing about the frame budget. When the module counts frames
(:class:`~iquitos_lightning.agents.contract.FrameCounting`), the training bar here advances in frames
towards ``frame_budget``; its text shows the window-averaged fps and ETA of a :class:`StepRate`
callback, the last episode return, and the memory seen by a :class:`VRAMMonitor`, when those
callbacks are in the Trainer. It reads what they already measured: nothing extra on the hot path.
Without them, or on a module without counters, it behaves like Lightning's ``RichProgressBar``.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks.progress.rich_progress import CustomTimeColumn, ProcessingSpeedColumn
from rich.progress import ProgressColumn, Task
from rich.text import Text

from iquitos_lightning.agents.contract import FrameCounting, frame_budget, frames_done
from iquitos_lightning.fastpath.progress_description import EpochOnlyWhenUnbounded
from iquitos_lightning.training.callbacks.step_rate import StepRate, format_duration
from iquitos_lightning.training.callbacks.vram import VRAMMonitor


def format_count(value: float) -> str:
    """``999``, ``12.3k``, ``4.56M``: short enough for a status line."""
    for threshold, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= threshold:
            return f"{value / threshold:.3g}{suffix}"
    return f"{value:.3g}" if isinstance(value, float) and not float(value).is_integer() else f"{int(value)}"


def run_status(
    frames_done: int | None,
    frame_budget: int | None,
    frames_per_s: float | None,
    eta_s: float | None,
    last_return: float | None,
    memory: str | None,
) -> dict[str, str]:
    """The fields shown after the bar, in order; absent quantities are left out."""
    status: dict[str, str] = {}
    if frames_done is not None:
        status["frames"] = format_count(frames_done) + (f"/{format_count(frame_budget)}" if frame_budget else "")
    if frames_per_s is not None:
        status["fps"] = format_count(round(frames_per_s, 1))
    if eta_s is not None:
        status["ETA"] = format_duration(eta_s)
    if last_return is not None:
        status["return"] = f"{last_return:.4g}"
    if memory is not None:
        status["mem"] = memory
    return status


class ElapsedColumn(ProgressColumn):
    """The time since the bar started, in Lightning's style, without a remaining time (the ETA field has it)."""

    max_refresh = 0.5  # as Lightning's time column: no jitter

    def __init__(self, style: Any) -> None:
        self.style = style
        super().__init__()

    def render(self, task: Task) -> Text:
        elapsed = task.finished_time if task.finished else task.elapsed
        return Text(format_duration(elapsed), style=self.style)


def frame_progress(pl_module: pl.LightningModule | None) -> tuple[int, int] | None:
    """``(frames_done, frame_budget)`` when the module counts frames towards a budget, else None."""
    frames, budget = frames_done(pl_module), frame_budget(pl_module)
    return (frames, budget) if frames is not None and budget else None


def find_callback(trainer: pl.Trainer, kind: type) -> Any:
    """The trainer's first callback of ``kind`` (None: none): what a bar reads its rates and memory from."""
    return next((callback for callback in trainer.callbacks if isinstance(callback, kind)), None)


class RLProgressBar(EpochOnlyWhenUnbounded):
    """Lightning's rich bar, counting environment frames and showing fps, ETA, return and memory."""

    def get_metrics(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        step_rate: StepRate | None = find_callback(trainer, StepRate)
        monitor: VRAMMonitor | None = find_callback(trainer, VRAMMonitor)
        rates = step_rate.rates if step_rate is not None else None
        # Without frame counters Lightning's own it/s column already shows batches/s.
        frames_per_s = rates.frames_per_s if rates is not None else None
        status = run_status(
            frames_done=frames_done(pl_module),
            frame_budget=frame_budget(pl_module),
            frames_per_s=frames_per_s,
            eta_s=step_rate.eta_s if step_rate is not None else None,
            last_return=pl_module.last_episode_return if isinstance(pl_module, FrameCounting) else None,
            memory=monitor.latest.short_text() if monitor is not None and monitor.latest is not None else None,
        )
        return {**status, **super().get_metrics(trainer, pl_module)}

    def configure_columns(self, trainer: pl.Trainer) -> list:
        """Lightning's columns when the bar counts frames, less its batches/s speed (the fps field replaces it)
        and with its time column showing only the elapsed time: its own remaining time, extrapolated from the
        bar's progress since the start, sat beside the ETA field and disagreed with it (``0:33:07`` beside
        ``ETA: 5:44:06`` on a real run), so the bar shows one ETA, :class:`StepRate`'s."""
        columns = super().configure_columns(trainer)
        if frame_progress(trainer.lightning_module) is None:
            return columns
        return [
            ElapsedColumn(style=column.style) if isinstance(column, CustomTimeColumn) else column
            for column in columns
            if not isinstance(column, ProcessingSpeedColumn)
        ]

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_epoch_start(trainer, pl_module)  # resets the bar to the epoch's batches...
        self._show_frames(pl_module)  # ...which an RL run replaces by its frames

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        self._show_frames(pl_module)

    def _show_frames(self, pl_module: pl.LightningModule) -> None:
        frames = frame_progress(pl_module)
        if frames is None or self.is_disabled or self.progress is None or self.train_progress_bar_id is None:
            return
        self.progress.update(self.train_progress_bar_id, completed=frames[0], total=frames[1])
        self.refresh()
