"""The reward normaliser against hand computations (returns reset at done, gym's running variance), on batched
rollouts, across rollouts and checkpoints, and inside PPO on real Pendulum rollouts."""

from __future__ import annotations

import io
import math

import pytest
import torch
from tensordict import TensorDict

from iquitos_lightning.agents import PPO, EnvConfig, RolloutConfig
from iquitos_lightning.agents.reward_normalizer import RewardNormalizer
from iquitos_lightning.envs.env_config import Episodes


def rollout_of(rewards: list, dones: list) -> TensorDict:
    """A ``[*batch, time]`` rollout holding only what the normaliser reads."""
    reward = torch.tensor(rewards, dtype=torch.float32).unsqueeze(-1)
    done = torch.tensor(dones, dtype=torch.bool).unsqueeze(-1)
    return TensorDict({"next": {"reward": reward, "done": done}}, batch_size=reward.shape[:-1])


def update(normalizer: RewardNormalizer, rewards: list, dones: list) -> None:
    step = rollout_of(rewards, dones)["next"]
    normalizer.update(step["reward"], step["done"])


def gym_running_var(values: list[float]) -> tuple[float, float, float]:
    """gym's RunningMeanStd(epsilon=1e-4), one value per update as its NormalizeReward does: count, mean, var."""
    count, mean, var = 1e-4, 0.0, 1.0
    for value in values:
        delta = value - mean
        total = count + 1
        mean = mean + delta / total
        var = (var * count + delta**2 * count / total) / total
        count = total
    return count, mean, var


def test_the_returns_reset_after_done_and_the_std_is_gyms_running_std_by_hand():
    normalizer = RewardNormalizer(gamma=0.5)
    rollout = rollout_of([1.0, 2.0, 3.0, 4.0], [False, True, False, False])
    normalizer.normalize_rollout(rollout)
    # returns: 1, 0.5*1 + 2 = 2.5, then reset after the done: 3, 0.5*3 + 4 = 5.5 (mean 3, population var 2.625)
    total = 1e-4 + 4
    mean = 3 * 4 / total
    var = (1e-4 * 1.0 + 2.625 * 4 + 3**2 * 1e-4 * 4 / total) / total
    assert float(normalizer.count) == pytest.approx(total, rel=1e-12)
    assert float(normalizer.mean) == pytest.approx(mean, rel=1e-12)
    assert float(normalizer.var) == pytest.approx(var, rel=1e-12)
    assert (float(normalizer.count), float(normalizer.mean), float(normalizer.var)) == pytest.approx(
        gym_running_var([1.0, 2.5, 3.0, 5.5]), rel=1e-12
    )
    assert normalizer.std == pytest.approx(math.sqrt(var + 1e-8), rel=1e-12)
    assert float(normalizer.returns) == 5.5  # the episode in progress goes on into the next rollout
    expected = torch.tensor([1.0, 2.0, 3.0, 4.0]) / math.sqrt(var + 1e-8)
    torch.testing.assert_close(rollout["next", "reward"].squeeze(-1), expected)


def test_the_returns_carry_over_to_the_next_rollout_as_if_it_were_one():
    whole = RewardNormalizer(gamma=0.9)
    update(whole, [1.0, -2.0, 3.0, 0.5, 4.0], [False, False, True, False, False])
    split = RewardNormalizer(gamma=0.9)
    update(split, [1.0, -2.0], [False, False])
    assert float(split.returns) == pytest.approx(0.9 * 1.0 - 2.0)
    update(split, [3.0, 0.5, 4.0], [True, False, False])
    for name in ("count", "mean", "var", "returns"):
        assert float(getattr(split, name)) == pytest.approx(float(getattr(whole, name)), rel=1e-12), name
    assert float(whole.returns) == pytest.approx(0.9 * 0.5 + 4.0)


def test_batched_rollouts_keep_one_return_per_env_whatever_the_leading_dims():
    rewards = [[1.0, 1.0, 1.0], [2.0, 0.0, 2.0]]
    dones = [[False, True, False], [False, False, False]]
    normalizer = RewardNormalizer(gamma=0.5)
    rollout = rollout_of(rewards, dones)  # [envs, time], the batched twin's shape
    normalizer.normalize_rollout(rollout)
    torch.testing.assert_close(normalizer.returns, torch.tensor([1.0, 2.0 * 0.25 + 2.0], dtype=torch.float64))
    returns = [1.0, 1.5, 1.0, 2.0, 1.0, 2.5]  # env 0: 1, 1.5, reset, 1; env 1: 2, 1, 2.5
    assert (float(normalizer.count), float(normalizer.mean), float(normalizer.var)) == pytest.approx(
        gym_running_var(returns), rel=1e-12
    )
    assert rollout["next", "reward"].shape == (2, 3, 1)
    torch.testing.assert_close(rollout["next", "reward"], torch.tensor(rewards).unsqueeze(-1) / normalizer.std)

    workers_of_envs = RewardNormalizer(gamma=0.5)  # [workers, envs, time]: the same two envs twice
    update(workers_of_envs, [rewards, rewards], [dones, dones])
    assert workers_of_envs.returns.shape == (2, 2)
    assert (float(workers_of_envs.count), float(workers_of_envs.mean), float(workers_of_envs.var)) == pytest.approx(
        gym_running_var(returns * 2), rel=1e-12
    )


def test_a_rollout_with_a_non_finite_reward_leaves_the_statistics_alone():
    normalizer = RewardNormalizer(gamma=0.99)
    update(normalizer, [1.0, 2.0], [False, False])
    before = normalizer.state_dict() | {"returns": normalizer.returns.clone()}
    rollout = rollout_of([float("nan"), 2.0], [False, False])
    normalizer.normalize_rollout(rollout)
    after = normalizer.state_dict() | {"returns": normalizer.returns}
    for name, value in before.items():
        assert torch.equal(after[name], value), name
    assert torch.isnan(rollout["next", "reward"][0])  # still NaN: the agent's guard skips the update


def test_the_statistics_survive_a_weights_only_checkpoint_of_a_ppo_and_the_returns_restart():
    settings = {
        "env": EnvConfig(name="Pendulum-v1", episodes=Episodes(seed=4, max_steps=40)),
        "rollout": RolloutConfig(frames_per_batch=100, eval_every_frames=100),
        "hidden_sizes": (8,),
    }
    agent = PPO(**settings)
    data = agent.with_advantages(agent.train_env.rollout(100, break_when_any_done=False))
    assert agent.reward_metrics()["reward_norm_std"] == agent.reward_normalizer.std != 1.0
    assert float(agent.reward_normalizer.count) == pytest.approx(100, abs=1e-3)
    assert data["next", "reward"].abs().max() < 20  # Pendulum's rewards reach -16 per step; divided by their std
    checkpoint = {"state_dict": agent.state_dict()}
    agent.on_save_checkpoint(checkpoint)
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    buffer.seek(0)

    fresh = PPO(**settings)
    assert fresh.reward_normalizer.std == pytest.approx(1.0)
    fresh.on_load_checkpoint(torch.load(buffer, weights_only=True))
    saved = agent.reward_normalizer.state_dict()
    assert "returns" in saved  # kept for a twin run, which goes on with the saved episodes
    for name in ("count", "mean", "var"):
        assert torch.equal(fresh.reward_normalizer.state_dict()[name], saved[name]), name
    assert fresh.reward_normalizer.returns is None  # Pendulum: a resumed run starts fresh episodes (resume.py)


def test_the_returns_in_progress_come_back_only_when_the_episodes_go_on():
    normalizer = RewardNormalizer(gamma=0.5)
    update(normalizer, [1.0, 2.0], [False, False])
    state = normalizer.state_dict()
    assert float(state["returns"]) == 2.5
    fresh, going_on = RewardNormalizer(gamma=0.5), RewardNormalizer(gamma=0.5)
    fresh.load_state_dict(state)
    going_on.load_state_dict(state, episodes_go_on=True)
    assert fresh.returns is None and float(going_on.returns) == 2.5
    assert "returns" not in RewardNormalizer(gamma=0.5).state_dict()  # none in progress before the first rollout


def test_without_reward_normalization_only_reward_scale_applies_and_nothing_is_saved():
    agent = PPO(
        env=EnvConfig(name="Pendulum-v1", episodes=Episodes(seed=4, max_steps=40)),
        rollout=RolloutConfig(frames_per_batch=64, eval_every_frames=64),
        hidden_sizes=(8,),
        reward_normalization=False,
        reward_scale=0.5,
    )
    rollout = agent.train_env.rollout(50)
    data = agent.with_advantages(rollout)
    torch.testing.assert_close(data["next", "reward"], rollout["next", "reward"] * 0.5, rtol=0, atol=0)
    assert agent.reward_metrics() == {} and agent.agent_state() == {}
