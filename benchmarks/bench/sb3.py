"""The Stable-Baselines3 side of the training comparison, on the very same Gymnasium env.

Why SB3 and how it is matched: SB3 is the usual single-process reference for SAC/PPO/A2C. It
trains :class:`~iquitos_lightning.envs.citylearn.IquitosEnv` itself (SB3 wraps it in its
``Monitor`` and ``DummyVecEnv``, as any user would get), with the hyperparameters of
:class:`~benchmarks.bench.settings.AlgorithmSettings`: the same network widths and
activation, batch/minibatch, learning rate (SAC: one rate for actor, critics and alpha, as ours
are set), gamma, rollout length (SAC: ``train_freq`` = our ``frames_per_batch`` with
``gradient_steps`` = updates per rollout; PPO/A2C: ``n_steps``), epochs, GAE lambda, gradient clip,
Adam for A2C (SB3 defaults to RMSprop). When ours collects with several env workers, SB3 gets as
many envs (``n_envs``, its default ``DummyVecEnv``) and a rollout of the same total frames.
SB3 is a benchmark-only extra (``requirements-bench.lock``, ``scripts/install-bench.sh``): without
it, :func:`train_sb3` raises :class:`SB3Missing` and the bench skips the comparison, saying so.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.bench.settings import AlgorithmSettings
from benchmarks.bench.timing import Rate

INSTALL_HINT = (
    "Stable-Baselines3 is a benchmark-only extra: run `bash scripts/install-bench.sh` (see docs/performance.md)"
)


class SB3Missing(ImportError):
    """stable-baselines3 is not installed in this environment."""


def _sb3() -> Any:
    try:
        # lazy: stable-baselines3 is optional (the bench venv only)
        import stable_baselines3
    except ImportError as error:
        raise SB3Missing(INSTALL_HINT) from error
    return stable_baselines3


def sb3_available() -> bool:
    try:
        _sb3()
    except SB3Missing:
        return False
    return True


def build_sb3(settings: AlgorithmSettings, env: Any, seed: int = 0) -> Any:
    """The SB3 model matching ``settings`` on ``env`` (CPU)."""
    # lazy: stable-baselines3 is optional (the bench venv only)
    import torch

    sb3 = _sb3()
    activation = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[settings.activation]
    num_envs = getattr(env, "num_envs", 1)
    steps_per_env = settings.rollout_frames // num_envs  # one rollout = this many steps of every env
    hidden = [settings.hidden, settings.hidden]
    common: dict[str, Any] = {"learning_rate": settings.lr, "gamma": settings.gamma, "seed": seed, "device": "cpu"}
    if settings.algorithm == "SAC":
        policy_kwargs = {"net_arch": {"pi": hidden, "qf": hidden}, "activation_fn": activation}
        return sb3.SAC(
            "MlpPolicy",
            env,
            buffer_size=max(settings.warmup_frames + 2 * settings.measured_frames, 10_000),
            learning_starts=settings.warmup_frames,
            batch_size=settings.batch_size,
            train_freq=(steps_per_env, "step"),
            gradient_steps=int(settings.updates_per_rollout),
            policy_kwargs=policy_kwargs,
            verbose=0,
            **common,
        )
    policy_kwargs = {"net_arch": {"pi": hidden, "vf": hidden}, "activation_fn": activation}
    on_policy = {"n_steps": steps_per_env, "gae_lambda": settings.gae_lambda, "ent_coef": 0.0}
    on_policy |= {"vf_coef": 0.5, "max_grad_norm": settings.max_grad_norm}
    if settings.algorithm == "PPO":
        return sb3.PPO(
            "MlpPolicy",
            env,
            batch_size=settings.batch_size,
            n_epochs=settings.epochs,
            policy_kwargs=policy_kwargs,
            verbose=0,
            **on_policy,
            **common,
        )
    if settings.algorithm == "A2C":
        return sb3.A2C(
            "MlpPolicy", env, use_rms_prop=False, policy_kwargs=policy_kwargs, verbose=0, **on_policy, **common
        )
    raise ValueError(f"unknown algorithm {settings.algorithm!r}")


def make_sb3_env(site: str, data_root: Path, num_envs: int = 1) -> Any:
    """SB3's default vectorisation of our env: ``num_envs`` copies stepped one after another in this
    process (``DummyVecEnv``), each in SB3's ``Monitor``."""
    # lazy: stable-baselines3 is optional (the bench venv only)
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    from iquitos_lightning.envs.citylearn import make_iquitos_env

    return DummyVecEnv([lambda: Monitor(make_iquitos_env(site, data_root=data_root)) for _ in range(num_envs)])


def train_sb3(settings: AlgorithmSettings, site: str, data_root: Path, env: Any = None) -> Rate:
    """Train a fresh SB3 model for as many frames as ours and return its steady-state rate.

    Marks are taken at the start of each rollout (after the previous one's training) and once at the
    end, the same phase as ours (after each training batch).
    """
    # lazy: stable-baselines3 is optional (the bench venv only)
    from stable_baselines3.common.callbacks import BaseCallback

    model = build_sb3(settings, env if env is not None else make_sb3_env(site, data_root))
    marks: list[tuple[float, int]] = []

    class Marks(BaseCallback):
        def _on_rollout_start(self) -> None:
            marks.append((time.perf_counter(), self.num_timesteps))

        def _on_step(self) -> bool:
            return True

    rollout = settings.rollout_frames
    budget = settings.warmup_frames + rollout + settings.measured_frames
    budget = -(-budget // rollout) * rollout
    model.learn(budget, callback=Marks())
    marks.append((time.perf_counter(), model.num_timesteps))
    start = next(mark for mark in marks if mark[1] >= settings.warmup_frames + rollout)
    frames = marks[-1][1] - start[1]
    updates = frames / rollout * settings.updates_per_rollout
    return Rate(marks[-1][0] - start[0], {"frames": frames, "updates": updates})
