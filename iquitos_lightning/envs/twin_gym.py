"""One twin env as a Gymnasium env: the evaluation env of ``env.backend.evaluate: twin``.

Why: a deterministic full-year evaluation of the 128-socket site takes about 5 minutes on CityLearn and
about half a minute on the twin, which is bit-equal to it (tests/envs/test_twin.py: observations, rewards,
flows and KPIs of the same policy closed loop on both). Evaluating on the twin at intervals during
training is what makes learning curves affordable; the final numbers can still be checked on CityLearn
(``test`` with ``--model.init_args.env.backend.evaluate citylearn``). The env runs the year from hour 0, as
CityLearn's episode does, and exposes ``flows``/``departures``/``site_config`` like the CityLearn env, so
the evaluation KPIs are computed by the same code.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from iquitos_lightning.envs.hour_context import HourContext
from iquitos_lightning.envs.twin import IquitosTwin
from iquitos_lightning.envs.twin_site import TwinSite


class TwinGymEnv(gym.Env):
    """A B = 1 recording :class:`IquitosTwin` behind the Gymnasium API of the CityLearn env (flat ``Box`` spaces)."""

    metadata = {"render_modes": []}

    def __init__(self, twin: IquitosTwin) -> None:
        self.site = TwinSite(twin)
        self.site_config = twin.site_config
        self.hours = twin.hours
        observation_size = int(twin.observation_spec["observation"].shape[-1])
        action_size = int(twin.action_spec.shape[-1])
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (observation_size,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (action_size,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return self.site.reset()

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        return self.site.step(action)

    def hour_context(self) -> HourContext:
        """The hour the twin is at ([1] tensors, envs/hour_context.py), for a controller above the env."""
        return self.site.twin.hour_context()

    def flows(self):
        return self.site.flows()

    def departures(self):
        return self.site.departures()
