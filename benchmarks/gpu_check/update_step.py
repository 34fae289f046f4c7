"""The update step of SAC, PPO and A2C at Iquitos size, timed under one set of fast-path switches and one precision.

Why its own module: the GPU profiles' defaults must be the fastest switch set whose losses stay
finite and match eager, and only a measurement on the GPU in question can say which. Both
``benchmarks/bench_speed.py`` (a table on any machine) and the ``gpu-check`` command measure cells
with :func:`measure_update_step`. The networks are Iquitos-sized (532 observations, 129 actions, as
the 128-socket site) on a stand-in Gymnasium env with those spaces, so the update is measured
without CityLearn's tens of milliseconds per step. Only ``training_step`` is timed (storing the
rollout and the updates), after ``warmup`` rollouts (compilation and CUDA-graph capture happen
there). The first rollout's losses are kept, so a cell can be compared with eager at the same
seed (same initial weights, same data).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import gymnasium as gym
import lightning.pytorch as pl
import numpy as np
import torch

from benchmarks.bench.trainer import bare_trainer
from iquitos_lightning.agents import A2C, PPO, SAC, EnvConfig, ReplayBufferConfig, RolloutConfig
from iquitos_lightning.agents.speed import SpeedConfig

STAND_IN_ID = "IquitosShaped-v0"
SWITCH_SETS = ("eager", "compile", "cuda_graphs", "compile+cuda_graphs")
IQUITOS_OBSERVATIONS = 532
IQUITOS_ACTIONS = 129


class IquitosShapedEnv(gym.Env):
    """Random observations of the site's size: only the shapes matter for the update step's speed."""

    def __init__(self, obs: int = IQUITOS_OBSERVATIONS, act: int = IQUITOS_ACTIONS, episode_steps: int = 8760) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (obs,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (act,), np.float32)
        self.episode_steps = episode_steps
        self.steps = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        self.steps = 0
        return self.observation_space.sample(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.steps += 1
        reward = -float(np.square(action).mean())
        return self.observation_space.sample(), reward, False, self.steps >= self.episode_steps, {}


def register_stand_in(obs: int = IQUITOS_OBSERVATIONS, act: int = IQUITOS_ACTIONS) -> None:
    """Register (or re-register with new sizes) the stand-in env under :data:`STAND_IN_ID`."""
    gym.envs.registration.registry.pop(STAND_IN_ID, None)
    gym.register(STAND_IN_ID, entry_point=IquitosShapedEnv, kwargs={"obs": obs, "act": act})


@dataclass(frozen=True)
class UpdateStepSizes:
    """What one cell trains: networks, batch and rollout sizes, and how many rollouts are warm-up and timed."""

    hidden_sizes: tuple[int, ...] = (256, 256)
    batch_size: int = 256  # SAC batch, PPO minibatch
    sac_frames: int = 100  # frames (= updates) per SAC rollout
    onpolicy_frames: int = 1024  # frames per PPO/A2C rollout
    warmup: int = 2  # rollouts not timed (compilation, capture)
    rollouts: int = 4  # rollouts timed


class UpdateTimer(pl.Callback):
    """Seconds spent in ``training_step`` and updates done there after the warm-up rollouts; the first losses."""

    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.seconds = 0.0
        self.updates = 0
        self.finite = True
        self.first_losses: dict[str, float] = {}
        self._start = 0.0
        self._updates_before = 0

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        _synchronize(pl_module)
        self._start = time.perf_counter()
        self._updates_before = pl_module.updates_done

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        _synchronize(pl_module)
        losses = {key: float(value) for key, value in outputs.items() if "loss" in key}
        self.finite &= all(math.isfinite(value) for value in losses.values())
        if not self.first_losses:
            self.first_losses = losses
        if trainer.global_step and batch_idx >= self.warmup:
            self.seconds += time.perf_counter() - self._start
            self.updates += pl_module.updates_done - self._updates_before


def _synchronize(module: Any) -> None:
    if module.device.type == "cuda":
        torch.cuda.synchronize(module.device)


def speed_config(switches: str, accelerator: str) -> SpeedConfig:
    """``"compile+cuda_graphs"`` -> the agents' switches (TF32 wherever the accelerator is not the CPU)."""
    return SpeedConfig(compile="compile" in switches, cuda_graphs="cuda_graphs" in switches, tf32=accelerator != "cpu")


def make_agent(algorithm: str, speed: SpeedConfig, sizes: UpdateStepSizes) -> Any:
    """The algorithm on the stand-in env, its budget exactly ``warmup + rollouts`` rollouts, no evaluation."""
    env = EnvConfig(name=STAND_IN_ID)
    frames = sizes.sac_frames if algorithm == "sac" else sizes.onpolicy_frames
    budget = frames * (sizes.warmup + sizes.rollouts)
    rollout = RolloutConfig(frame_budget=budget, frames_per_batch=frames, eval_every_frames=budget, eval_episodes=0)
    hidden = tuple(sizes.hidden_sizes)
    if algorithm == "sac":
        return SAC(
            env=env,
            rollout=rollout,
            buffer=ReplayBufferConfig(capacity=100_000),
            hidden_sizes=hidden,
            batch_size=sizes.batch_size,
            init_random_frames=0,
            speed=speed,
        )
    if algorithm == "ppo":
        return PPO(
            env=env, rollout=rollout, hidden_sizes=hidden, minibatch_size=sizes.batch_size, epochs=2, speed=speed
        )
    if algorithm == "a2c":
        return A2C(env=env, rollout=rollout, hidden_sizes=hidden, speed=speed)
    raise ValueError(f"unknown algorithm {algorithm!r}: use sac, ppo or a2c")


@dataclass
class UpdateStepResult:
    """One cell: updates/s after warm-up, whether every loss stayed finite, and the first rollout's losses."""

    algorithm: str
    switches: str
    precision: str
    accelerator: str
    updates_per_s: float
    updates_timed: int
    losses_finite: bool
    first_losses: dict[str, float]
    switches_run: str  # what really ran after the agent's speed plan (e.g. CUDA graphs refused under 16-mixed)
    wall_s: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure_update_step(
    algorithm: str,
    switches: str,
    precision: str,
    accelerator: str,
    sizes: UpdateStepSizes,
    seed: int = 0,
    obs: int = IQUITOS_OBSERVATIONS,
    act: int = IQUITOS_ACTIONS,
) -> UpdateStepResult:
    """Train ``algorithm`` on the stand-in env with ``switches`` and ``precision``; time the updates after warm-up."""
    register_stand_in(obs, act)
    pl.seed_everything(seed, verbose=False)
    agent = make_agent(algorithm, speed_config(switches, accelerator), sizes)
    timer = UpdateTimer(sizes.warmup)
    trainer = bare_trainer(accelerator=accelerator, precision=precision, callbacks=[timer])
    started = time.perf_counter()
    trainer.fit(agent)
    # The plan the fit ran, not a new one: Lightning's teardown has moved the agent back to the CPU by now.
    ran = _switches_of(agent.planned_speed or agent.speed_config)
    return UpdateStepResult(
        algorithm=algorithm,
        switches=switches,
        precision=precision,
        accelerator=accelerator,
        updates_per_s=timer.updates / timer.seconds if timer.seconds else float("nan"),
        updates_timed=timer.updates,
        losses_finite=timer.finite,
        first_losses=timer.first_losses,
        switches_run=ran,
        wall_s=time.perf_counter() - started,
    )


def _switches_of(speed: SpeedConfig) -> str:
    names = [name for name in ("compile", "cuda_graphs") if getattr(speed, name)]
    return "+".join(names) or "eager"


def largest_relative_difference(losses: dict[str, float], reference: dict[str, float]) -> float:
    """max over shared loss terms of |a - b| / max(|b|, 1e-6): how far a cell's first losses are from eager's."""
    shared = [key for key in losses if key in reference]
    if not shared:
        return float("nan")
    return max(abs(losses[key] - reference[key]) / max(abs(reference[key]), 1e-6) for key in shared)
