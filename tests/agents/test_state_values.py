"""The on-policy agents' advantages: the critic's values written on tensors (agents/on_policy.py ``state_values``)
and TorchRL's GAE reading them equal TorchRL's GAE running the critic itself, bit for bit."""

from __future__ import annotations

import pytest
import torch
from torchrl.objectives.value import GAE

from iquitos_lightning.agents import A2C, PPO, EnvConfig, RolloutConfig
from iquitos_lightning.envs.env_config import Backend, TrainingAids

# 6-hour episodes from staggered starts: the rollout crosses truncations, where GAE bootstraps from the next value.
SITE = EnvConfig(
    name="iquitos",
    site="configs/site/tiny.yaml",
    backend=Backend(train="twin", num_envs=4),
    training=TrainingAids(start="staggered", episode_hours=6),
)
ROLLOUT = RolloutConfig(frames_per_batch=64, eval_every_frames=64)


@pytest.mark.parametrize("agent_class", [PPO, A2C])
def test_advantages_equal_gae_with_the_critic_as_its_value_network(agent_class):
    torch.manual_seed(0)
    agent = agent_class(env=SITE, rollout=ROLLOUT, hidden_sizes=(16, 16), reward_normalization=False, reward_scale=0.5)
    with torch.no_grad():
        rollout = agent.train_env.rollout(16, agent.actor, break_when_any_done=False)
    assert rollout["next", "truncated"].any()  # the bootstrap at a truncation is exercised

    ours = agent.with_advantages(rollout.clone())

    library = rollout.clone()
    library["next", "reward"] = library["next", "reward"] * 0.5
    module = agent.advantage_module
    gae = GAE(gamma=float(module.gamma), lmbda=float(module.lmbda), value_network=agent.critic, average_gae=False)
    with torch.no_grad():
        gae(library)

    for key in ("state_value", ("next", "state_value"), "advantage", "value_target"):
        assert torch.equal(ours[key], library[key]), key
    assert ours["advantage"].abs().sum() > 0 and not torch.equal(ours["state_value"], ours["next", "state_value"])
