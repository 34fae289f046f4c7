"""The progress of a run as plain lines, for a log that is read from a file.

Why: rich draws its bar only on a terminal, so a fit logged to a file (``fit ... > fit.log 2>&1`` under ``nohup``,
tmux logging or a cluster scheduler) wrote the parameter summary and then nothing for the whole run: no frames, no
rate, no ETA, not the evaluations as they happened. Off a terminal the CLI installs this bar in place of
:class:`~iquitos_lightning.training.callbacks.progress.RLProgressBar` (as Lightning's own bar degrades to lines and
SB3 prints its table every few thousand steps). Each line is whole and plain, with no escape codes or carriage
returns, so ``tail -f`` and ``grep`` read it:

- a progress line when training starts and whenever the frames done cross the next ``every_percent`` of the frame
  budget (the budget's end included): frames done of the budget, frames/s and the ETA (:class:`StepRate`'s, as the
  rich bar shows them, when it is in the Trainer; else over the frames since the previous line), the last training
  episode's return once one has ended, the process's resident memory (and the GPU's, read by a
  :class:`VRAMMonitor`, on CUDA);
- a line per evaluation: the frames it evaluated and its figures as logged, the evaluation year's return and, on the
  site, its bill; the share of the rule-to-optimum gap it closes when ``results/<site>/baselines.json`` holds this
  year's references (training/reference_gap.py, as the final test's line); the selection year's score and the best so
  far when the run selects (``select/score``).

It only reads what the module counts and the callbacks measured. A module without frame counters gets the
evaluation lines only.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks.progress.progress_bar import ProgressBar
from rich.console import Console

from iquitos_lightning.agents import RLAgent
from iquitos_lightning.agents.contract import FrameCounting
from iquitos_lightning.agents.selection import SELECTION_METRIC
from iquitos_lightning.envs.env_config import IQUITOS
from iquitos_lightning.envs.objectives import TARIFF
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.training.callbacks.best_checkpoint import BestCheckpoint
from iquitos_lightning.training.callbacks.progress import find_callback, frame_progress
from iquitos_lightning.training.callbacks.step_rate import StepRate, eta_seconds, format_duration
from iquitos_lightning.training.callbacks.vram import GIB, VRAMMonitor, process_rss_bytes
from iquitos_lightning.training.reference_gap import ReferenceGap, reference_gap

RETURN, BILL = "val/episode_return", "val/kpi/tariff_cost"  # the evaluation year's figures (callbacks/evaluation.py)


def draws_a_bar() -> bool:
    """Whether rich draws its live bar on this process's stdout: a terminal or Jupyter, by rich's own test (which
    also honours ``FORCE_COLOR`` and ``TTY_COMPATIBLE``). Elsewhere it would print nothing until the run ends."""
    console = Console()
    return console.is_terminal or console.is_jupyter


def next_line_at(frames: int, budget: int, every_percent: float) -> int:
    """The frame count at which the next progress line is due: the first multiple of ``every_percent`` of ``budget``
    above ``frames`` (a rollout that crosses several marks gives one line)."""
    step = budget * every_percent / 100
    return math.ceil((math.floor(frames / step) + 1) * step)


def figure(value: float) -> str:
    """``4,204,168`` for a bill, ``-695.95`` for a return: whole units above 1,000."""
    return f"{value:,.0f}" if abs(value) >= 1_000 else f"{value:,.2f}"


class LineProgressBar(ProgressBar):
    """Plain progress lines every ``every_percent`` of the frame budget and one line per evaluation (module
    docstring)."""

    def __init__(self, every_percent: float = 5.0) -> None:
        super().__init__()
        if not 0 < every_percent <= 100:
            raise ConfigError(f"every_percent must be in (0, 100] (a share of the frame budget), got {every_percent}")
        self.every_percent = every_percent
        self._enabled = True
        self._started_s = time.perf_counter()
        self._last: tuple[float, int] = (self._started_s, 0)  # time and frames of the previous progress line
        self._next_at: float = 0
        self._best_score: float | None = None
        self._gap: ReferenceGap | None = None
        self._gap_read = False

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def print(self, *args: Any, **kwargs: Any) -> None:
        if self._enabled:
            print(*args, **kwargs, flush=True)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._started_s = time.perf_counter()
        progress = frame_progress(pl_module)
        if progress is None:
            return
        self._last = (self._started_s, progress[0])  # a resumed run starts at its checkpoint's frames
        self._say_progress(trainer, pl_module, *progress)

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        progress = frame_progress(pl_module)
        if progress is not None and progress[0] >= self._next_at:
            self._say_progress(trainer, pl_module, *progress)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        metrics = {name: float(value) for name, value in trainer.callback_metrics.items()}
        if RETURN not in metrics:
            return
        frames = f" at {pl_module.frames_done:,} frames" if isinstance(pl_module, FrameCounting) else ""
        figures = [f"return {figure(metrics[RETURN])}"]
        if BILL in metrics:
            figures.append(f"bill {figure(metrics[BILL])} PEN")
        gap = self._reference_gap(pl_module)
        if gap is not None and (BILL in metrics or gap.objective != TARIFF):
            row = {"tariff_cost": metrics.get(BILL, math.nan), "episode_return": metrics[RETURN]}
            figures.append(f"gap closed {gap.closed_pct(row):.1f} %")
        if SELECTION_METRIC in metrics:
            figures.append(self._selection(trainer, metrics[SELECTION_METRIC]))
        self.print(f"{self._clock()} evaluation{frames}: {', '.join(figures)}")

    def _say_progress(self, trainer: pl.Trainer, pl_module: pl.LightningModule, frames: int, budget: int) -> None:
        self._next_at = min(next_line_at(frames, budget, self.every_percent), budget) if frames < budget else math.inf
        if not trainer.is_global_zero:
            return
        now = time.perf_counter()
        step_rate: StepRate | None = find_callback(trainer, StepRate)
        if step_rate is not None and step_rate.rates is not None and step_rate.rates.frames_per_s is not None:
            # the rich bar's figures; the CLI's StepRate runs after this bar, so they are the batch before's
            frames_per_s, eta_s = step_rate.rates.frames_per_s, step_rate.eta_s if frames < budget else 0.0
        else:
            last_s, last_frames = self._last
            frames_per_s = (frames - last_frames) / (now - last_s) if frames > last_frames and now > last_s else None
            eta_s = eta_seconds(frames, budget, frames_per_s)
        self._last = (now, frames)
        parts = [f"progress {100 * frames / budget:.1f} % ({frames:,}/{budget:,} frames)"]
        parts.append(f"{frames_per_s:,.0f} frames/s" if frames_per_s is not None else "- frames/s")
        parts.append(f"ETA {format_duration(eta_s)}")
        last_return = pl_module.last_episode_return if isinstance(pl_module, FrameCounting) else None
        if last_return is not None:
            parts.append(f"return {figure(last_return)}")
        parts.append(f"RSS {process_rss_bytes() / GIB:.2f} GB")
        monitor: VRAMMonitor | None = find_callback(trainer, VRAMMonitor)
        if monitor is not None and monitor.latest is not None and monitor.latest.kind == "cuda":
            parts.append(f"GPU {monitor.latest.short_text()}")
        self.print(f"{self._clock()} {', '.join(parts)}")

    def _selection(self, trainer: pl.Trainer, score: float) -> str:
        """``select/score`` and the best so far: this run's, or a resumed run's best before it (``best.ckpt``)."""
        best_checkpoint: BestCheckpoint | None = find_callback(trainer, BestCheckpoint)
        saved = best_checkpoint.best_model_score if best_checkpoint is not None else None
        scores = [score, self._best_score, float(saved) if saved is not None else None]
        finite = [value for value in scores if value is not None and math.isfinite(value)]
        self._best_score = max(finite) if finite else None
        best = f" (best so far {figure(self._best_score)})" if self._best_score is not None else ""
        return f"{SELECTION_METRIC} {figure(score)}{best}"

    def _reference_gap(self, pl_module: pl.LightningModule) -> ReferenceGap | None:
        """The evaluation year's gap ends, read once per fit at its first evaluation (None: not the site, or no
        current ``baselines.json``). A file that cannot be read costs the line its gap, never the run."""
        if not self._gap_read and isinstance(pl_module, RLAgent) and pl_module.env_config.name == IQUITOS:
            env = pl_module.env_config
            try:
                self._gap = reference_gap(Path(env.site), env.objective)
            except (OSError, ValueError, KeyError):
                self._gap = None
        self._gap_read = True
        return self._gap

    def _clock(self) -> str:
        return f"[{format_duration(time.perf_counter() - self._started_s)}]"
