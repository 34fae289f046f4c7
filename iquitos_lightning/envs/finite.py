"""Check what crosses the env boundary: a non-finite observation or reward stops the run, naming the key.

Why at the boundary: one NaN from the simulator (a gap in a data series, a division in a reward
term) spreads through the replay buffer into every later update and shows up hours later as a NaN
loss with no hint of where it came from. Checked as it leaves the env, the error names the
observation (by the env's ``observation_names`` when it has them, e.g. ``mall_forecast_1`` for the
Iquitos site), the step and the episode. The check is a few microseconds per step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from iquitos_lightning.errors import NumericalFault


class NonFiniteEnvValue(NumericalFault):
    """The env produced a NaN or infinite observation or reward."""


class FiniteValues(gym.Wrapper):
    """Raises :class:`NonFiniteEnvValue` when ``reset``/``step`` return a non-finite observation or reward."""

    def __init__(self, env: gym.Env, env_name: str) -> None:
        super().__init__(env)
        self.env_name = env_name
        names = getattr(env.unwrapped, "observation_names", None)
        self.observation_names: Sequence[str] | None = list(names) if names is not None else None
        self.episode = -1
        self.step_in_episode = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        observation, info = self.env.reset(**kwargs)
        self.episode += 1
        self.step_in_episode = 0
        self._check_observation(observation, "reset")
        return observation, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.step_in_episode += 1
        if not np.all(np.isfinite(reward)):
            raise NonFiniteEnvValue(
                f"env {self.env_name!r} returned a non-finite reward ({reward}) at step {self.step_in_episode} "
                f"of episode {self.episode}{_reward_terms_hint(info)}"
            )
        self._check_observation(observation, "step")
        return observation, reward, terminated, truncated, info

    def _check_observation(self, observation: Any, where: str) -> None:
        for key, values in _named_parts(observation):
            values = np.asarray(values, dtype=np.float64)
            if np.all(np.isfinite(values)):
                continue
            index = int(np.flatnonzero(~np.isfinite(values.reshape(-1)))[0])
            name = self._name(key, index)
            raise NonFiniteEnvValue(
                f"env {self.env_name!r} returned a non-finite observation {name} = {values.reshape(-1)[index]} "
                f"at step {self.step_in_episode} of episode {self.episode} ({where}); check the data this "
                "observation is computed from (for the site: series.csv of its built dataset)"
            )

    def _name(self, key: str | None, index: int) -> str:
        if key is None and self.observation_names is not None and index < len(self.observation_names):
            return f"{self.observation_names[index]!r} (observation[{index}])"
        return f"{key or 'observation'}[{index}]"


def _named_parts(observation: Any) -> list[tuple[str | None, Any]]:
    """``[(None, array)]`` for a Box observation, ``[(key, array), ...]`` for a Dict one."""
    if isinstance(observation, Mapping):
        return [(str(key), value) for key, value in observation.items()]
    return [(None, observation)]


def _reward_terms_hint(info: Mapping[str, Any]) -> str:
    """Name the reward terms that are non-finite when the env reports them (the Iquitos env does)."""
    terms = info.get("reward_terms") if isinstance(info, Mapping) else None
    if terms is None:
        return ""
    items = terms.items() if isinstance(terms, Mapping) else vars(terms).items()
    bad = [name for name, value in items if not np.all(np.isfinite(value))]
    return f"; non-finite reward terms: {', '.join(bad)}" if bad else ""
