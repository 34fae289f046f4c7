"""Measure the fast-path switches on our SAC, PPO and A2C: gradient updates per second, and whether losses stay finite.

Why a script: the GPU profiles' defaults must be the fastest switch set that keeps the losses finite
and the learning curve the same, and only a measurement on the GPU in question can say which.
The networks are Iquitos-sized (``--obs 532 --act 129``, as the 128-socket site) on a stand-in
Gymnasium env with those spaces, so the update step is measured without CityLearn's ~38 ms per
step. Only ``training_step`` is timed (storing the rollout and the updates), after ``--warmup``
rollouts (compilation and CUDA-graph capture happen there).

    python benchmarks/bench_speed.py                                # CPU: eager vs compile, 32-true
    python benchmarks/bench_speed.py --accelerator gpu --precisions 32-true 16-mixed bf16-mixed \\
        --switches eager compile cuda_graphs compile+cuda_graphs

Prints one table (rich) and, with ``--json PATH``, writes the rows.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import lightning.pytorch as pl
import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from iquitos_lightning.agents import A2C, PPO, SAC, EnvConfig, ReplayBufferConfig, RolloutConfig
from iquitos_lightning.agents.speed import SpeedConfig
from iquitos_lightning.bench.trainer import bare_trainer

STAND_IN_ID = "IquitosShaped-v0"


class IquitosShapedEnv(gym.Env):
    """Random observations of the site's size: only the shapes matter for the update step's speed."""

    def __init__(self, obs: int = 532, act: int = 129, episode_steps: int = 8760) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (obs,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (act,), np.float32)
        self.episode_steps = episode_steps
        self.steps = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.steps = 0
        return self.observation_space.sample(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.steps += 1
        reward = -float(np.square(action).mean())
        return self.observation_space.sample(), reward, False, self.steps >= self.episode_steps, {}


class UpdateTimer(pl.Callback):
    """Seconds spent in ``training_step`` and updates done there, after the warm-up rollouts."""

    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.seconds = 0.0
        self.updates = 0
        self.finite = True
        self._start = 0.0
        self._updates_before = 0

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        _synchronize(pl_module)
        self._start = time.perf_counter()
        self._updates_before = pl_module.updates_done

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        _synchronize(pl_module)
        losses = [value for key, value in outputs.items() if "loss" in key]
        self.finite &= all(math.isfinite(value) for value in losses)
        if trainer.global_step and batch_idx >= self.warmup:
            self.seconds += time.perf_counter() - self._start
            self.updates += pl_module.updates_done - self._updates_before


def _synchronize(module: Any) -> None:
    if module.device.type == "cuda":
        torch.cuda.synchronize(module.device)


def make_agent(algorithm: str, speed: SpeedConfig, args: argparse.Namespace) -> Any:
    env = EnvConfig(name=STAND_IN_ID)
    hidden = tuple(args.hidden)
    if algorithm == "sac":
        frames = args.sac_frames
        rollout = RolloutConfig(
            frame_budget=frames * (args.warmup + args.rollouts),
            frames_per_batch=frames,
            eval_every_frames=frames * (args.warmup + args.rollouts),
            eval_episodes=0,
        )
        return SAC(
            env=env,
            rollout=rollout,
            buffer=ReplayBufferConfig(capacity=100_000),
            hidden_sizes=hidden,
            batch_size=args.batch,
            init_random_frames=0,
            speed=speed,
        )
    frames = args.onpolicy_frames
    rollout = RolloutConfig(
        frame_budget=frames * (args.warmup + args.rollouts),
        frames_per_batch=frames,
        eval_every_frames=frames * (args.warmup + args.rollouts),
        eval_episodes=0,
    )
    if algorithm == "ppo":
        return PPO(env=env, rollout=rollout, hidden_sizes=hidden, minibatch_size=args.batch, epochs=2, speed=speed)
    return A2C(env=env, rollout=rollout, hidden_sizes=hidden, speed=speed)


def measure(algorithm: str, switches: str, precision: str, args: argparse.Namespace) -> dict[str, Any]:
    speed = SpeedConfig(
        compile="compile" in switches, cuda_graphs="cuda_graphs" in switches, tf32=args.accelerator != "cpu"
    )
    pl.seed_everything(0, verbose=False)
    agent = make_agent(algorithm, speed, args)
    timer = UpdateTimer(args.warmup)
    trainer = bare_trainer(accelerator=args.accelerator, precision=precision, callbacks=[timer])
    started = time.perf_counter()
    trainer.fit(agent)
    return {
        "algorithm": algorithm.upper(),
        "switches": switches,
        "precision": precision,
        "updates_per_s": timer.updates / timer.seconds if timer.seconds else float("nan"),
        "updates_timed": timer.updates,
        "losses_finite": timer.finite,
        "wall_s": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algorithms", nargs="+", default=["sac", "ppo", "a2c"])
    parser.add_argument("--switches", nargs="+", default=["eager", "compile"])
    parser.add_argument("--precisions", nargs="+", default=["32-true"])
    parser.add_argument("--accelerator", default="cpu")
    parser.add_argument("--obs", type=int, default=532)
    parser.add_argument("--act", type=int, default=129)
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256])
    parser.add_argument("--batch", type=int, default=256, help="SAC batch / PPO minibatch")
    parser.add_argument("--sac-frames", type=int, default=100, help="frames (= updates) per SAC rollout")
    parser.add_argument("--onpolicy-frames", type=int, default=1024, help="frames per PPO/A2C rollout")
    parser.add_argument("--warmup", type=int, default=2, help="rollouts not timed (compilation, capture)")
    parser.add_argument("--rollouts", type=int, default=4, help="rollouts timed")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    gym.register(STAND_IN_ID, entry_point=IquitosShapedEnv, kwargs={"obs": args.obs, "act": args.act})

    rows = [measure(a, s, p, args) for a in args.algorithms for p in args.precisions for s in args.switches]
    table = Table(
        title=f"update step, {args.obs} obs / {args.act} act, {args.hidden}, batch {args.batch}, {args.accelerator}"
    )
    for column in ("algorithm", "switches", "precision", "updates/s", "timed", "losses finite", "wall s"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["algorithm"],
            row["switches"],
            row["precision"],
            f"{row['updates_per_s']:.1f}",
            str(row["updates_timed"]),
            str(row["losses_finite"]),
            f"{row['wall_s']:.0f}",
        )
    Console(width=140).print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
