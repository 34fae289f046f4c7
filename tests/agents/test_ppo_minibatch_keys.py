"""PPO cuts its minibatches from the entries its loss reads only (``OnPolicyAgent.update_keys``): the losses are
those of minibatches of the whole rollout, bit for bit; and it gathers each epoch's shuffled rows into tensors kept
between rollouts: the minibatches it updates on are the rows ``data[permutation]`` gives, in the same order."""

from __future__ import annotations

from pathlib import Path

import torch
from torchrl.envs import ExplorationType, set_exploration_type

from iquitos_lightning.agents import PPO, EnvConfig, RolloutConfig
from iquitos_lightning.envs.env_config import Backend, TrainingAids

TINY = str(Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml")


def tiny_ppo(tmp_path: Path) -> PPO:
    return PPO(
        env=EnvConfig(
            site=TINY,
            layout="fleet",
            objective="tariff",
            backend=Backend(train="twin", num_envs=4, data_root=str(tmp_path / "data")),
            training=TrainingAids(start="staggered", episode_hours=8),
        ),
        rollout=RolloutConfig(frame_budget=64, frames_per_batch=64, eval_every_frames=64, eval_episodes=0),
        hidden_sizes=(16, 16),
        minibatch_size=16,
        policy_scale="state",
    )


def test_minibatches_of_the_update_keys_give_the_losses_of_minibatches_of_the_whole_rollout(tmp_path: Path) -> None:
    torch.manual_seed(0)
    agent = tiny_ppo(tmp_path)
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


def test_the_minibatches_are_the_rows_of_each_epochs_permutation_gathered_into_kept_tensors(tmp_path: Path) -> None:
    torch.manual_seed(0)
    agent = tiny_ppo(tmp_path)
    with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
        rollout = agent.train_env.rollout(16, agent.actor, break_when_any_done=False)
    data = agent.with_advantages(rollout)
    seen: list[dict[str, torch.Tensor]] = []
    agent.run_update = lambda batch: seen.append(batch.clone().to_dict()) or {"loss": torch.zeros(())}

    def updates_of_two_rollouts() -> tuple[list[dict[str, torch.Tensor]], list[object]]:
        seen.clear()
        buffers = []
        for _ in range(2):
            agent.learn_in_minibatches(data, epochs=2, minibatch_size=16)
            buffers.append(agent._shuffled_rows)
        return list(seen), buffers

    torch.manual_seed(1)
    updates, buffers = updates_of_two_rollouts()
    assert buffers[0] is buffers[1]  # the second rollout writes into the first one's tensors
    torch.manual_seed(1)
    selected = data.select(*agent.update_keys()).reshape(-1)
    expected = [selected[rows].to_dict() for _ in range(4) for rows in torch.randperm(64).split(16)]
    assert len(updates) == len(expected) == 16
    for got, want in zip(updates, expected, strict=True):
        assert got.keys() == want.keys()
        assert all(torch.equal(got[key], want[key]) for key in want)
    agent.learn_in_minibatches(data[:, :8], epochs=1, minibatch_size=16)  # another rollout size: fresh tensors
    assert agent._shuffled_rows is not buffers[0] and agent._shuffled_rows.batch_size == torch.Size([32])
