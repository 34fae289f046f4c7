"""FlatGymEnv writes what TorchRL's GymWrapper + StepCounter + RewardSum stack wrote, value for value."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
import torch
from tensordict import TensorDictBase

from iquitos_lightning.agents import EnvConfig
from iquitos_lightning.envs.env_config import Episodes
from iquitos_lightning.envs.factory import EpisodeSeeding, episode_seeding, general_torchrl_env, make_env
from iquitos_lightning.envs.finite import FiniteValues
from iquitos_lightning.envs.gym_env import FlatGymEnv, is_flat_box_env

TINY = str(Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml")


def _both(make_gym: callable, seed: int) -> tuple[FlatGymEnv, object]:
    flat = FlatGymEnv(EpisodeSeeding(FiniteValues(make_gym(), "a"), seed))
    general = general_torchrl_env(EpisodeSeeding(FiniteValues(make_gym(), "a"), seed))
    return flat, general


def _assert_same(flat: TensorDictBase, general: TensorDictBase) -> None:
    assert set(flat.keys(True, True)) == set(general.keys(True, True))
    for key in flat.keys(True, True):
        assert flat[key].dtype == general[key].dtype, key
        assert torch.equal(flat[key], general[key]), key


def _step_side_by_side(flat: FlatGymEnv, general: object, steps: int) -> int:
    """Step both with the same random actions through ``step_and_maybe_reset`` (as collectors do); episodes ended."""
    generator = torch.Generator().manual_seed(0)
    flat_td, general_td = flat.reset(), general.reset()
    _assert_same(flat_td, general_td)
    low, high = flat.action_spec.space.low, flat.action_spec.space.high
    episodes = 0
    for _ in range(steps):
        action = low + (high - low) * torch.rand(flat.action_spec.shape, generator=generator)
        flat_td.set("action", action.clone())
        general_td.set("action", action.clone())
        flat_out, flat_td = flat.step_and_maybe_reset(flat_td)
        general_out, general_td = general.step_and_maybe_reset(general_td)
        _assert_same(flat_out, general_out)
        _assert_same(flat_td, general_td)
        episodes += int(flat_out["next", "done"])
    return episodes


def test_pendulum_steps_truncations_and_resets_match_the_general_stack() -> None:
    flat, general = _both(lambda: gym.make("Pendulum-v1", max_episode_steps=7), seed=5)
    assert flat.observation_spec == general.observation_spec
    assert flat.action_spec == general.action_spec
    assert flat.full_done_spec == general.full_done_spec
    assert _step_side_by_side(flat, general, steps=30) == 4  # truncated episodes, each reset from the next seed
    assert episode_seeding(flat).resets_done == 5


def test_the_iquitos_site_episode_matches_the_general_stack_to_the_bit(tmp_path: Path) -> None:
    from iquitos_lightning.envs.citylearn import make_iquitos_env

    flat, general = _both(lambda: make_iquitos_env(TINY, data_root=tmp_path), seed=0)
    hours = flat.gym_env.unwrapped.hours
    assert _step_side_by_side(flat, general, steps=hours + 3) == 1  # one whole episode, terminated, and a new one
    assert flat.reward_spec == general.reward_spec


def test_make_env_uses_the_flat_env_for_box_spaces_and_the_general_stack_otherwise() -> None:
    assert isinstance(make_env(EnvConfig(name="Pendulum-v1")), FlatGymEnv)
    cartpole = make_env(EnvConfig(name="CartPole-v1"))  # discrete actions: TorchRL's general wrapper
    assert not isinstance(cartpole, FlatGymEnv)
    assert cartpole.rollout(3).numel() == 3
    assert not is_flat_box_env(gym.make("CartPole-v1"))


def test_a_non_box_env_is_refused_with_the_way_out() -> None:
    with pytest.raises(TypeError, match="GymWrapper"):
        FlatGymEnv(gym.make("CartPole-v1"))


def test_set_seed_does_not_advance_the_episode_counter() -> None:
    env = make_env(EnvConfig(name="Pendulum-v1", episodes=Episodes(seed=2)))
    env.set_seed(123)
    first = env.reset()["observation"]
    again = make_env(EnvConfig(name="Pendulum-v1", episodes=Episodes(seed=2))).reset()["observation"]
    assert torch.equal(first, again) and episode_seeding(env).resets_done == 1
