"""Our side of the training comparison: an agent trained through Lightning's real ``fit`` path.

Why ``Trainer.fit`` and not a stripped loop: the claim is about what a user runs. The Trainer is
the CLI's (no sanity validation, frame budget) minus what would write files: no logger, no
checkpoints, no progress bar; evaluation is off (``eval_episodes=0``), as SB3 evaluates nothing.
A callback records (time, frames, updates) after each training batch; the rate is taken from the
first batch after the warm-up to the last.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl

from benchmarks.bench.settings import IN_PROCESS, AlgorithmSettings, OurArchitecture
from benchmarks.bench.timing import Rate
from benchmarks.bench.trainer import bare_trainer
from iquitos_lightning.envs.env_config import Backend


class FrameMarks(pl.Callback):
    """(time, frames done, updates done) after every training batch: the rollouts a rate is read from."""

    def __init__(self) -> None:
        self.marks: list[tuple[float, int, int]] = []

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.marks.append((time.perf_counter(), int(pl_module.frames_done), int(pl_module.updates_done)))


def window_rate(marks: list[tuple[float, int, int]], start_frames: int) -> Rate:
    """Frames and updates between the first mark at or past ``start_frames`` and the last mark."""
    first = next(mark for mark in marks if mark[1] >= start_frames)
    last = marks[-1]
    return Rate(last[0] - first[0], {"frames": last[1] - first[1], "updates": last[2] - first[2]})


def build_agent(
    settings: AlgorithmSettings, site: str, data_root: Path, architecture: OurArchitecture = IN_PROCESS
) -> Any:
    """Our SAC/PPO/A2C with ``settings`` on ``site``, run as ``architecture`` says; the budget covers warm-up + one
    rollout + the timed frames (compilation happens in the untimed first learning rollout)."""
    # lazy: the agents (torch, Lightning, TorchRL) load only when a training section runs
    from iquitos_lightning.agents import A2C, PPO, SAC, EnvConfig, ReplayBufferConfig, RolloutConfig
    from iquitos_lightning.agents.speed import SpeedConfig

    rollout = settings.rollout_frames
    budget = settings.warmup_frames + rollout + settings.measured_frames
    budget = -(-budget // rollout) * rollout
    common: dict[str, Any] = {
        "env": EnvConfig(site=site, backend=Backend(num_workers=architecture.num_workers, data_root=str(data_root))),
        "rollout": RolloutConfig(
            frame_budget=budget,
            frames_per_batch=rollout,
            eval_every_frames=budget,
            eval_episodes=0,
            overlap=architecture.overlap,
        ),
        "hidden_sizes": (settings.hidden, settings.hidden),
        "activation": settings.activation,
        "gamma": settings.gamma,
        "speed": SpeedConfig(compile=architecture.compiled),
    }
    if settings.algorithm == "SAC":
        return SAC(
            **common,
            buffer=ReplayBufferConfig(capacity=max(budget, 10_000)),
            batch_size=settings.batch_size,
            actor_lr=settings.lr,
            critic_lr=settings.lr,
            alpha_lr=settings.lr,
            updates_per_frame=settings.updates_per_frame,
            init_random_frames=settings.warmup_frames,
        )
    on_policy = {
        "lr": settings.lr,
        "gae_lambda": settings.gae_lambda,
        "max_grad_norm": settings.max_grad_norm,
        "reward_normalization": False,  # SB3's PPO and A2C run without VecNormalize here: the same work per frame
    }
    if settings.algorithm == "PPO":
        return PPO(**common, **on_policy, epochs=settings.epochs, minibatch_size=settings.batch_size)
    if settings.algorithm == "A2C":
        return A2C(**common, **on_policy)
    raise ValueError(f"unknown algorithm {settings.algorithm!r}")


def train_ours(
    settings: AlgorithmSettings, site: str, data_root: Path, architecture: OurArchitecture = IN_PROCESS
) -> Rate:
    """Fit a fresh agent and return its steady-state frames and updates over wall time (worker start-up and
    compilation fall in the untimed warm-up)."""
    agent = build_agent(settings, site, data_root, architecture)
    marks = FrameMarks()
    trainer = bare_trainer(accelerator="cpu", callbacks=[marks])
    trainer.fit(agent)
    return window_rate(marks.marks, settings.warmup_frames + settings.rollout_frames)
