"""Real learning on Pendulum-v1: PPO clearly beats a random policy (about a minute on the 2-core machine).

In a file of its own (the SAC test beside it), so the two long learning tests can run on both pytest-xdist workers
at the same time.
"""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from agents_testkit import cpu_trainer

from iquitos_lightning.agents import PPO, EnvConfig, RolloutConfig
from iquitos_lightning.envs.env_config import Episodes
from iquitos_lightning.envs.factory import episode_seeding, make_env

EVAL_EPISODES = 3


def random_policy_return(env_config: EnvConfig) -> float:
    """Mean return of uniformly random actions over the evaluation episodes the agents are scored on."""
    env = make_env(env_config, evaluation=True)
    returns = []
    for episode in range(EVAL_EPISODES):
        episode_seeding(env).resets_done = episode
        rollout = env.rollout(1_000, break_when_any_done=True)
        returns.append(float(rollout["next", "reward"].sum()))
    return sum(returns) / len(returns)


@pytest.mark.slow
def test_ppo_improves_clearly_over_a_random_policy_on_pendulum():
    torch.set_num_threads(1)
    pl.seed_everything(0)
    env_config = EnvConfig(name="Pendulum-v1", episodes=Episodes(seed=1))
    agent = PPO(
        env=env_config,
        rollout=RolloutConfig(frame_budget=12_288, frames_per_batch=1_024, eval_every_frames=12_288, eval_episodes=3),
        lr=1e-3,
        gamma=0.9,  # rewards as they come: the agent's reward normaliser scales them (no reward_scale)
        minibatch_size=64,
        epochs=10,
    )
    trainer = cpu_trainer()
    trainer.fit(agent)
    final_return = float(trainer.callback_metrics["val/episode_return"])
    random_return = random_policy_return(env_config)
    assert random_return < -900  # Pendulum: a random policy scores about -1200
    assert final_return > random_return + 400, (final_return, random_return)
