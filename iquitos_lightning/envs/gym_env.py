"""A TorchRL env over a Gymnasium env with flat ``Box`` observations and actions, in one layer.

Why not ``GymWrapper`` + ``DoubleToFloat`` + ``StepCounter`` + ``RewardSum``: that stack is general
(any space, any Gym version, info readers, nested specs) and pays for it on every step: at the
38-socket Iquitos site it added about 2 ms to a 7.8 ms step (28 %), the biggest cost of ours that
Stable-Baselines3 does not pay (docs/performance.md). Agents here only ever see flat float vectors,
so this env converts the observation and reward straight to float32 tensors and keeps the step count
and the episode's running reward itself, writing the very keys the stack wrote (``observation``,
``reward``, ``done``/``terminated``/``truncated``, ``step_count``, ``episode_reward``), with the
same values: ``tests/agents/test_gym_env.py`` steps both side by side.

Envs with other spaces (dict observations, discrete actions) keep the general stack
(:func:`~iquitos_lightning.envs.factory.make_env` decides with :func:`is_flat_box_env`).
``set_seed`` does nothing on purpose: episodes are seeded by the Gymnasium env's own
:class:`~iquitos_lightning.envs.factory.EpisodeSeeding` counter, which a seed call must not advance.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase


def _box_spec(space: gym.spaces.Box) -> Bounded | Unbounded:
    """A float32 spec of ``space``: unbounded when every bound is infinite, as ``GymWrapper`` reads a ``Box``."""
    low = torch.as_tensor(space.low, dtype=torch.float32)
    high = torch.as_tensor(space.high, dtype=torch.float32)
    if low.isinf().all() and high.isinf().all():
        return Unbounded(shape=space.shape, dtype=torch.float32)
    return Bounded(low, high, shape=space.shape, dtype=torch.float32)


def is_flat_box_env(env: gym.Env) -> bool:
    """Whether ``env`` has one-dimensional ``Box`` observation and action spaces (what :class:`FlatGymEnv` takes)."""
    spaces = (env.observation_space, env.action_space)
    return all(isinstance(space, gym.spaces.Box) and len(space.shape) == 1 for space in spaces)


def set_flat_specs(env: EnvBase, observation_space: gym.spaces.Box, action_space: gym.spaces.Box) -> None:
    """Give ``env`` the specs the general stack declares for these spaces, so networks, collectors and
    checkpoints see no difference (also what :class:`SpecsOnly` declares)."""
    env.observation_spec = Composite(
        observation=_box_spec(observation_space),
        step_count=Bounded(0, torch.iinfo(torch.int64).max, shape=(1,), dtype=torch.int64),
        episode_reward=Unbounded(shape=(1,), dtype=torch.float32),
    )
    env.action_spec = _box_spec(action_space)
    env.reward_spec = Unbounded(shape=(1,), dtype=torch.float32)
    flag = Categorical(2, shape=(1,), dtype=torch.bool)
    env.full_done_spec = Composite(done=flag.clone(), terminated=flag.clone(), truncated=flag.clone())


class SpecsOnly(EnvBase):
    """The specs of a :class:`FlatGymEnv` over these spaces, without any simulator behind them.

    Why: the auto profile sizes a run from the env's specs (observation and action size, bytes per stored
    transition); for the Iquitos site those follow from its config alone, so no site has to be built (and
    CityLearn loaded) a second time before the agent builds its own. Stepping it is refused.
    """

    def __init__(self, observation_space: gym.spaces.Box, action_space: gym.spaces.Box) -> None:
        super().__init__(device="cpu", batch_size=torch.Size([]))
        set_flat_specs(self, observation_space, action_space)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        raise TypeError("SpecsOnly describes an env's specs; build the env itself to run it")

    _step = _reset

    def _set_seed(self, seed: int | None) -> None:
        return None


class FlatGymEnv(EnvBase):
    """``env`` as a TorchRL env on the CPU: float32 observation and reward, a step count and the episode's return."""

    def __init__(self, env: gym.Env) -> None:
        if not is_flat_box_env(env):
            raise TypeError(
                f"FlatGymEnv takes 1-D Box observation and action spaces, got {env.observation_space} and "
                f"{env.action_space}: use torchrl's GymWrapper"
            )
        super().__init__(device="cpu", batch_size=torch.Size([]))
        self._env = env
        self._steps = 0
        self._episode_reward = 0.0
        set_flat_specs(self, env.observation_space, env.action_space)
        self._action_dtype = env.action_space.dtype

    @property
    def gym_env(self) -> gym.Env:
        """The Gymnasium env stepped underneath (what ``GymWrapper`` calls ``_env``)."""
        return self._env

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        observation, _ = self._env.reset()
        self._steps = 0
        self._episode_reward = 0.0
        return self._output(observation, 0.0, False, False, with_reward=False)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get("action").numpy()
        if action.dtype != np.float64:  # a residual's float64 action (control/residual.py) goes in unrounded
            action = action.astype(self._action_dtype, copy=False)
        observation, reward, terminated, truncated, _ = self._env.step(action)
        self._steps += 1
        reward32 = np.float32(reward)
        self._episode_reward = float(np.float32(self._episode_reward) + reward32)  # RewardSum adds in float32
        return self._output(observation, reward32, bool(terminated), bool(truncated), with_reward=True)

    def _output(
        self, observation: Any, reward: Any, terminated: bool, truncated: bool, *, with_reward: bool
    ) -> TensorDictBase:
        values = {
            "observation": torch.from_numpy(np.array(observation, dtype=np.float32)),  # a copy: envs may reuse buffers
            "step_count": torch.tensor([self._steps]),
            "episode_reward": torch.tensor([self._episode_reward], dtype=torch.float32),
            "done": torch.tensor([terminated or truncated]),
            "terminated": torch.tensor([terminated]),
            "truncated": torch.tensor([truncated]),
        }
        if with_reward:
            values["reward"] = torch.tensor([reward], dtype=torch.float32)
        return TensorDict(values, batch_size=torch.Size([]))

    def _set_seed(self, seed: int | None) -> None:
        return None  # episodes are seeded by the episode counter of the Gymnasium env (module docstring)
