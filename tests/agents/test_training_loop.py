"""The shared loop: frame budget, one update per rollout (A2C), epochs x minibatches (PPO), env out of modules."""

from __future__ import annotations

import lightning.pytorch as pl
from agents_testkit import BatchRecorder, cpu_trainer, small_sac
from torchrl.envs import EnvBase

from iquitos_lightning.agents import A2C, PPO, EnvConfig, RolloutConfig
from iquitos_lightning.envs.env_config import Episodes

PENDULUM = EnvConfig(name="Pendulum-v1", episodes=Episodes(seed=2, max_steps=64))


def test_a2c_makes_one_update_per_rollout_and_stops_at_the_frame_budget():
    pl.seed_everything(0)
    agent = A2C(env=PENDULUM, rollout=RolloutConfig(frame_budget=320, frames_per_batch=64, eval_every_frames=128))
    trainer = cpu_trainer(max_epochs=1)  # the frame budget, not max_epochs, ends training
    trainer.fit(agent)
    assert agent.frames_done == 320 and agent.updates_done == 5
    assert agent.episodes_done == 5 and agent.last_episode_return is not None
    assert trainer.global_step == 5


def test_ppo_runs_epochs_of_minibatches_over_each_rollout():
    pl.seed_everything(0)
    agent = PPO(
        env=PENDULUM,
        rollout=RolloutConfig(frame_budget=256, frames_per_batch=128, eval_every_frames=128),
        epochs=2,
        minibatch_size=32,
    )
    recorder = BatchRecorder()
    trainer = cpu_trainer(callbacks=[recorder])
    trainer.fit(agent)
    assert agent.updates_done == 2 * 2 * (128 // 32)
    assert sorted(recorder.outputs) == [128, 256]
    assert "val/episode_return" in trainer.callback_metrics


def test_sac_global_step_counts_one_optimizer_step_per_update_while_frames_count_the_budget():
    pl.seed_everything(0)
    agent = small_sac(150)
    trainer = cpu_trainer()
    trainer.fit(agent)
    assert agent.frames_done == 150 and agent.updates_done == 150
    assert trainer.global_step == agent.updates_done  # one Adam, a group per network (agents/sac.py)


def test_env_is_never_a_child_module_nor_in_the_checkpoint():
    agent = small_sac(50)
    assert not any(isinstance(module, EnvBase) for module in agent.modules())
    assert isinstance(agent.train_env, EnvBase)
    assert not any("env" in key.split(".")[0] for key in agent.state_dict())
