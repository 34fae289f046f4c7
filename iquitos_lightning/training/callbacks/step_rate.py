"""How fast a run goes: environment frames/s, gradient updates/s, episodes done and the ETA.

Why: in RL, Lightning's own "it/s" counts dataloader batches, which here are collector rollouts of
any size; the budget is in environment frames and the cost is in gradient updates. This callback
reads the module's counters after every training batch (a clock read and a few attribute reads),
averages the rates over a sliding window of recent batches so one slow evaluation does not swing
the ETA, and logs them every ``log_every_n_steps`` batches.

What it reads from the LightningModule: the counters of
:class:`~iquitos_lightning.agents.contract.FrameCounting` (frames done, frame budget as the ETA target,
updates, episodes, the last episode's return), when the module has them. On any other LightningModule the
rate falls back to training batches/s and the ETA to the Trainer's ``max_steps`` (in optimizer steps,
``global_step``).

Metrics: ``speed/frames_per_s``, ``speed/updates_per_s``, ``speed/batches_per_s``,
``progress/frames_done``, ``progress/updates_done``, ``progress/episodes_done``, ``progress/eta_s``.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl

from iquitos_lightning.agents.contract import FrameCounting, frame_budget, frames_done
from iquitos_lightning.errors import ConfigError


@dataclass(frozen=True)
class CounterSample:
    """The module's counters at one instant."""

    time_s: float
    batches: int
    global_step: int
    frames: int | None = None
    updates: int | None = None


@dataclass(frozen=True)
class Rates:
    """Rates over a window and the ETA; ``None`` where the module does not count that quantity."""

    batches_per_s: float
    steps_per_s: float
    frames_per_s: float | None = None
    updates_per_s: float | None = None


def window_rates(oldest: CounterSample, newest: CounterSample) -> Rates | None:
    """Rates between two samples; None when no time has passed (the first batch)."""
    elapsed = newest.time_s - oldest.time_s
    if elapsed <= 0:
        return None

    def rate(first: int | None, last: int | None) -> float | None:
        return None if first is None or last is None else (last - first) / elapsed

    return Rates(
        batches_per_s=(newest.batches - oldest.batches) / elapsed,
        steps_per_s=(newest.global_step - oldest.global_step) / elapsed,
        frames_per_s=rate(oldest.frames, newest.frames),
        updates_per_s=rate(oldest.updates, newest.updates),
    )


def eta_seconds(done: int, total: int | None, per_second: float | None) -> float | None:
    """Seconds until ``done`` reaches ``total`` at ``per_second``; 0 when reached, None when unknowable."""
    if total is None or total <= 0 or per_second is None:
        return None
    remaining = total - done
    if remaining <= 0:
        return 0.0
    return remaining / per_second if per_second > 0 else math.inf


def format_duration(seconds: float | None) -> str:
    """``1:02:03`` style, ``3d 04:05:06`` beyond a day, ``-`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    whole = int(round(seconds))
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{days}d {clock}" if days else clock


def read_counters(trainer: pl.Trainer, pl_module: pl.LightningModule, batches: int) -> CounterSample:
    counting = isinstance(pl_module, FrameCounting)
    return CounterSample(
        time_s=time.perf_counter(),
        batches=batches,
        global_step=trainer.global_step,
        frames=frames_done(pl_module),
        updates=int(pl_module.updates_done) if counting else None,
    )


class StepRate(pl.Callback):
    """Sliding-window frames/s, updates/s and ETA to the frame budget, logged every N training batches.

    Args:
        log_every_n_steps: log every this many training batches (None: the Trainer's ``log_every_n_steps``).
        window: how many recent training batches the rates average over.
    """

    def __init__(self, log_every_n_steps: int | None = None, window: int = 100) -> None:
        if log_every_n_steps is not None and log_every_n_steps < 1:
            raise ConfigError(f"step_rate.log_every_n_steps must be >= 1 or null, got {log_every_n_steps}")
        if window < 2:
            raise ConfigError(f"step_rate.window must hold at least 2 samples, got {window}")
        self.log_every_n_steps = log_every_n_steps
        self.window = window
        self._samples: deque[CounterSample] = deque(maxlen=window)
        self._batches_seen = 0
        self.rates: Rates | None = None
        self.eta_s: float | None = None
        self.latest_metrics: dict[str, float] = {}

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._batches_seen = 0
        self._samples.clear()
        self._samples.append(read_counters(trainer, pl_module, 0))

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self._batches_seen += 1
        self.add_sample(read_counters(trainer, pl_module, self._batches_seen))
        interval = self.log_every_n_steps or max(1, trainer.log_every_n_steps)
        if self._batches_seen % interval == 0:
            self._update(trainer, pl_module)
            if trainer.is_global_zero and self.latest_metrics:
                for logger in trainer.loggers:
                    logger.log_metrics(self.latest_metrics, step=trainer.global_step)

    def add_sample(self, sample: CounterSample) -> None:
        """Add one batch's counters to the window; at the first update the window restarts from the batch before.

        Why: SAC's random warm-up collects without updating, 10x faster than training runs afterwards; a window
        holding warm-up batches showed ``ETA 0:03:01`` for a run then paced at 32 minutes."""
        if sample.updates and self._samples and self._samples[-1].updates == 0:
            self._samples = deque([self._samples[-1]], maxlen=self.window)
        self._samples.append(sample)

    def _update(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        rates = window_rates(self._samples[0], self._samples[-1])
        if rates is None:
            return
        newest = self._samples[-1]
        if newest.frames is not None and newest.updates == 0:
            eta = None  # warm-up (no update yet): the pace of training is not known, and "-" says so
        elif newest.frames is not None:
            eta = eta_seconds(newest.frames, frame_budget(pl_module), rates.frames_per_s)
        else:
            max_steps = trainer.max_steps if trainer.max_steps and trainer.max_steps > 0 else None
            eta = eta_seconds(newest.global_step, max_steps, rates.steps_per_s)
        self.rates, self.eta_s = rates, eta

        metrics = {"speed/batches_per_s": rates.batches_per_s}
        if rates.frames_per_s is not None:
            metrics["speed/frames_per_s"] = rates.frames_per_s
            metrics["progress/frames_done"] = float(newest.frames or 0)
        if rates.updates_per_s is not None:
            metrics["speed/updates_per_s"] = rates.updates_per_s
            metrics["progress/updates_done"] = float(newest.updates or 0)
        if isinstance(pl_module, FrameCounting):
            metrics["progress/episodes_done"] = float(pl_module.episodes_done)
            if pl_module.last_episode_return is not None:
                metrics["progress/last_episode_return"] = float(pl_module.last_episode_return)
        if eta is not None and math.isfinite(eta):
            metrics["progress/eta_s"] = eta
        self.latest_metrics = metrics
