"""n-step returns (agents/multi_step.py): hand-worked sums and flags, what SAC stores, the discount the loss uses."""

from __future__ import annotations

import pytest
import torch
from agents_testkit import small_sac
from tensordict import TensorDict

from iquitos_lightning.agents.multi_step import n_step_transitions


def _trajectory(terminated_at: int | None = None, truncated_at: int | None = None) -> TensorDict:
    """One env, 6 steps: rewards 1..6, observation t, next observation t + 1."""
    steps = 6
    terminated = torch.zeros(1, steps, 1, dtype=torch.bool)
    truncated = torch.zeros(1, steps, 1, dtype=torch.bool)
    if terminated_at is not None:
        terminated[0, terminated_at] = True
    if truncated_at is not None:
        truncated[0, truncated_at] = True
    observation = torch.arange(steps, dtype=torch.float32).reshape(1, steps, 1)
    following = {
        "observation": observation + 1,
        "reward": torch.arange(1.0, steps + 1).reshape(1, steps, 1),
        "done": terminated | truncated,
        "terminated": terminated,
        "truncated": truncated,
    }
    return TensorDict({"observation": observation, "next": following}, batch_size=[1, steps])


def test_rewards_are_summed_within_the_episode_and_flags_come_from_the_step_bootstrapped_from() -> None:
    out = n_step_transitions(_trajectory(terminated_at=3), gamma=0.5, n_steps=3)
    # step 0: 1 + 0.5 x 2 + 0.25 x 3; step 1: 2 + 0.5 x 3 + 0.25 x 4 (ends at the termination); a new episode at 4
    assert out["next", "reward"].flatten().tolist() == [2.75, 4.5, 5.0, 4.0, 8.0, 6.0]
    assert out["steps_to_next_obs"].flatten().tolist() == [3, 3, 2, 1, 2, 1]
    assert out["next", "observation"].flatten().tolist() == [3.0, 4.0, 4.0, 4.0, 6.0, 6.0]
    # steps 1-3 bootstrap from the terminal observation: terminated (TorchRL's MultiStep would leave 1 and 2 False)
    assert out["next", "terminated"].flatten().tolist() == [False, True, True, True, False, False]
    assert out["next", "done"].flatten().tolist() == [False, True, True, True, False, False]
    assert "original_reward" not in out["next"].keys() and "gamma" not in out.keys()


def test_a_truncation_ends_the_sum_but_is_not_a_termination() -> None:
    out = n_step_transitions(_trajectory(truncated_at=1), gamma=0.5, n_steps=3)
    assert out["next", "reward"].flatten().tolist() == [2.0, 2.0, 3.0 + 2.0 + 1.25, 4.0 + 2.5 + 1.5, 8.0, 6.0]
    assert out["next", "terminated"].flatten().tolist() == [False] * 6
    assert out["next", "truncated"].flatten().tolist() == [True, True, False, False, False, False]


def test_one_step_is_the_rollout_itself_and_zero_steps_are_refused() -> None:
    rollout = _trajectory()
    assert n_step_transitions(rollout, gamma=0.9, n_steps=1) is rollout
    with pytest.raises(ValueError, match="n_steps must be >= 1"):
        n_step_transitions(rollout, gamma=0.9, n_steps=0)


def test_sac_stores_n_step_transitions_and_its_target_discounts_by_gamma_to_the_steps_taken() -> None:
    gamma, n_steps = 0.9, 3
    agent = small_sac(200, gamma=gamma, n_steps=n_steps, init_random_frames=1_000)
    with torch.no_grad():
        rollout = agent.train_env.rollout(40, agent.actor, break_when_any_done=False)
    agent.learn(rollout)  # before init_random_frames: stored, no update
    stored = agent.replay_buffer[:]
    rewards = rollout["next", "reward"].flatten()
    expected = [sum(gamma**i * float(rewards[t + i]) for i in range(min(n_steps, 40 - t))) for t in range(40)]
    torch.testing.assert_close(stored["next", "reward"].flatten(), torch.tensor(expected))
    assert stored["steps_to_next_obs"].flatten().tolist() == [3] * 38 + [2, 1]
    torch.testing.assert_close(stored["next", "observation"][:38], rollout["next", "observation"][2:])

    next_value = torch.full_like(stored["next", "reward"], 10.0)
    target = agent.loss_module.value_estimator.value_estimate(stored, next_value=next_value)
    discount = gamma ** stored["steps_to_next_obs"].to(torch.float32).unsqueeze(-1)
    torch.testing.assert_close(target, stored["next", "reward"] + discount * 10.0)


def test_n_steps_below_one_is_refused_by_the_agent() -> None:
    with pytest.raises(ValueError, match="n_steps must be >= 1"):
        small_sac(100, n_steps=0)
