"""The configuration every agent shares (:class:`RolloutConfig`) and how configs arrive (dataclass or dict).

Why apart from the base: the auto profile and the CLI read these before any agent exists, and checkpoints
store them as plain dicts (:func:`plain`), which :func:`as_config` turns back into dataclasses.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, is_dataclass
from typing import Any, TypeVar

from iquitos_lightning.errors import ConfigError

ConfigT = TypeVar("ConfigT")


@dataclass
class RolloutConfig:
    """How much to collect, in environment frames, and how often to evaluate."""

    frame_budget: int = 1_000_000  # env frames collected by `fit` (the training budget; rounded up to whole batches)
    frames_per_batch: int = 1_000  # frames per collector rollout = one training batch
    eval_every_frames: int = 50_000  # validate (and end a Lightning epoch) every this many frames
    eval_episodes: int = 1  # full deterministic episodes per validation/test
    max_eval_steps: int = 100_000  # safety cap on the length of one evaluation episode
    max_nonfinite_in_a_row: int = 10  # updates with a non-finite loss/gradient skipped in a row before the run stops
    overlap: bool = False  # collect the next rollout in a worker process while learning from this one (SAC only)
    # Exploration noise held for this many collected steps (per env) before a fresh draw: 1 draws every step. Held
    # noise explores a consistent deviation for hours (fastpath/tanh_normal.py, as SB3's gSDE resamples every n steps).
    noise_hold_steps: int = 1


def check_fraction(name: str, value: float, *, zero_allowed: bool) -> float:
    """``model.<name>`` if it lies in (0, 1] ([0, 1] with ``zero_allowed``), else a one-line ConfigError. Why: a
    discount of 1.5 or a soft-update rate of 2 trained without a word before (the returns blow up later)."""
    low_ok = value >= 0 if zero_allowed else value > 0
    if not (math.isfinite(value) and low_ok and value <= 1):
        interval = "[0, 1]" if zero_allowed else "(0, 1]"
        raise ConfigError(f"model.{name} must be in {interval}, got {value!r}")
    return value


def check_learning_rates(**rates: float) -> None:
    """Each ``model.<name>`` a finite learning rate >= 0 (0 freezes that network: the health signals' test of a
    policy that does not move uses it)."""
    for name, rate in rates.items():
        if not (math.isfinite(rate) and rate >= 0):
            raise ConfigError(f"model.{name} must be a learning rate >= 0, got {rate!r}")


def check_reward_scale(reward_scale: float) -> float:
    """``model.reward_scale`` if it is a finite factor > 0: 0 would train on rewards of 0 (nothing to learn)."""
    if not (math.isfinite(reward_scale) and reward_scale > 0):
        raise ConfigError(f"model.reward_scale must be a factor > 0, got {reward_scale!r}")
    return reward_scale


def as_config(config_class: type[ConfigT], value: ConfigT | dict[str, Any] | None) -> ConfigT:
    """Accept a config dataclass or its dict (hparams of a checkpoint store plain dicts)."""
    if value is None:
        return config_class()
    if isinstance(value, config_class):
        return value
    if isinstance(value, dict):
        from_mapping = getattr(config_class, "from_mapping", None)
        if from_mapping is not None:  # a config of groups that also reads its earlier flat keys (EnvConfig)
            return from_mapping(value)
        known = {field.name for field in fields(config_class)}  # type: ignore[arg-type]
        return config_class(**{key: item for key, item in value.items() if key in known})
    raise TypeError(f"expected {config_class.__name__} or dict, got {type(value).__name__}")


def plain(value: Any) -> Any:
    """Dataclasses as dicts, tuples as lists: what a ``weights_only`` checkpoint load and a YAML file accept."""
    if is_dataclass(value) and not isinstance(value, type):
        return {key: plain(item) for key, item in asdict(value).items()}
    if isinstance(value, tuple | list):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


def check_rollout_config(config: RolloutConfig, parallel_envs: int, agent: str, off_policy: bool) -> None:
    """A one-line ConfigError for a rollout setting the loop cannot run: sizes that are not positive, ``overlap`` on an
    on-policy ``agent``, a rollout that the ``parallel_envs`` cannot share evenly, an evaluation period that is not
    a whole number of rollouts."""
    positive = ("frame_budget", "frames_per_batch", "max_eval_steps", "max_nonfinite_in_a_row", "noise_hold_steps")
    for name in positive:
        value = getattr(config, name)
        if value <= 0:
            raise ConfigError(f"model.rollout.{name} must be a positive integer, got {value}")
    if config.overlap and not off_policy:
        raise ConfigError(
            f"model.rollout.overlap: {agent} learns on-policy, so it cannot learn from a rollout "
            "collected by the previous policy; use model.env.backend.num_workers to collect in parallel instead"
        )
    if config.eval_episodes < 0:
        raise ConfigError(f"model.rollout.eval_episodes must be 0 or more, got {config.eval_episodes}")
    if config.frames_per_batch % parallel_envs:
        raise ConfigError(
            f"model.rollout.frames_per_batch ({config.frames_per_batch}) must be a multiple of the parallel envs "
            f"(model.env.backend.num_workers x num_envs = {parallel_envs}): each collects the same share of a rollout"
        )
    if config.eval_every_frames <= 0 or config.eval_every_frames % config.frames_per_batch:
        nearest = config.frames_per_batch * max(config.eval_every_frames // config.frames_per_batch, 1)
        raise ConfigError(
            f"model.rollout.eval_every_frames ({config.eval_every_frames}) must be a positive multiple of "
            f"model.rollout.frames_per_batch ({config.frames_per_batch}): an evaluation period is a whole "
            f"number of rollouts, e.g. {nearest}"
        )


def evaluation_period(frames_done: int, config: RolloutConfig) -> tuple[int, int]:
    """Frames at the start and end of the evaluation period in progress (end capped at the budget, rounded up to
    whole rollouts); both ``frames_done`` once the budget is spent."""
    period, batch = config.eval_every_frames, config.frames_per_batch
    budget = math.ceil(config.frame_budget / batch) * batch
    if frames_done >= budget:
        return frames_done, frames_done
    start = (frames_done // period) * period
    return start, min(start + period, budget)
