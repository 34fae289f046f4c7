"""PPO cuts its minibatches from the entries its loss reads only (``OnPolicyAgent.update_keys``): the losses are
those of minibatches of the whole rollout, bit for bit."""

from __future__ import annotations

from pathlib import Path

import torch
from torchrl.envs import ExplorationType, set_exploration_type

from iquitos_lightning.agents import PPO, EnvConfig, RolloutConfig

TINY = str(Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml")


def test_minibatches_of_the_update_keys_give_the_losses_of_minibatches_of_the_whole_rollout(tmp_path: Path) -> None:
    torch.manual_seed(0)
    agent = PPO(
        env=EnvConfig(
            site=TINY,
            data_root=str(tmp_path / "data"),
            backend="twin",
            num_envs=4,
            actions="fleet",
            objective="tariff",
            start="staggered",
            episode_hours=8,
        ),
        rollout=RolloutConfig(frame_budget=64, frames_per_batch=64, eval_every_frames=64, eval_episodes=0),
        hidden_sizes=(16, 16),
        minibatch_size=16,
        policy_scale="state",
    )
    with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
        rollout = agent.train_env.rollout(16, agent.actor, break_when_any_done=False)  # [4 envs, 16 steps]
    assert bool(rollout["next", "done"].any())  # 8-hour episodes: GAE cuts the traces inside the rollout
    data = agent.with_advantages(rollout)
    whole, selected = data.reshape(-1), data.select(*agent.update_keys()).reshape(-1)
    assert set(selected.keys(True, True)) < set(whole.keys(True, True))  # the next observations etc. stay out
    for index in torch.randperm(64).split(16):
        expected, losses = agent.loss_module(whole[index]), agent.loss_module(selected[index])
        assert set(losses.keys()) == set(expected.keys())
        for key in expected.keys():
            assert torch.equal(losses[key], expected[key]), key
