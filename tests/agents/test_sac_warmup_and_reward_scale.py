"""SAC stores rewards times ``reward_scale`` (its rollout and logged returns keep the env's), and collects
``init_random_frames`` frames of uniform random actions before its policy acts and learning starts."""

from __future__ import annotations

import warnings
from typing import Any

import lightning.pytorch as pl
import torch
from agents_testkit import cpu_trainer, small_sac


def test_rewards_are_stored_scaled_and_the_rollout_keeps_its_own():
    agent = small_sac(100, reward_scale=0.1, init_random_frames=1_000)
    rollout = agent.train_env.rollout(50)
    rewards = rollout["next", "reward"].clone()
    agent.learn(rollout)  # before init_random_frames: stored, no update
    stored = agent.replay_buffer.storage.get(slice(0, 50))
    torch.testing.assert_close(stored["next", "reward"], rewards * 0.1, rtol=0, atol=0)
    assert torch.equal(rollout["next", "reward"], rewards)
    assert rewards.abs().max() > 0.5  # Pendulum's rewards: the scaling is visible

    unscaled = small_sac(100, init_random_frames=1_000)
    unscaled.learn(rollout)
    assert torch.equal(unscaled.replay_buffer.storage.get(slice(0, 50))["next", "reward"], rewards)


class ActionRecorder(pl.Callback):
    """The largest |action| of each rollout, keyed by the frames done before it."""

    def __init__(self) -> None:
        self.largest: dict[int, float] = {}

    def on_train_batch_start(self, trainer: pl.Trainer, agent: Any, batch: Any, batch_idx: int) -> None:
        self.largest[agent.frames_done] = float(batch["action"].abs().max())


def test_the_first_init_random_frames_are_uniform_random_then_the_policy_acts():
    """A policy started at mean 0 with scale 0.01 (and kept there: its optimizer waits) acts within +-0.1 of 0;
    Pendulum's random actions spread over [-2, 2]."""
    pl.seed_everything(0)
    agent = small_sac(200, init_random_frames=100, zero_mean_start=True, initial_scale=0.01, actor_delay_frames=1_000)
    recorder = ActionRecorder()
    cpu_trainer(callbacks=[recorder], limit_val_batches=0).fit(agent)
    assert sorted(recorder.largest) == [0, 50, 100, 150]
    assert recorder.largest[0] > 1.0 and recorder.largest[50] > 1.0  # random: somewhere beyond +-1 in 50 draws
    assert recorder.largest[100] < 0.1 and recorder.largest[150] < 0.1  # the policy's
    assert agent.updates_done == 150  # none while fewer than 100 frames are stored; one per frame from the 100th on


def test_random_frames_not_a_multiple_of_the_rollout_are_whole_rollouts_without_torchrls_warning():
    """80 random frames in rollouts of 50: the collector draws the first two rollouts at random either way (it asks
    whether a rollout starts below the figure); the agent gives it 100, so TorchRL has nothing to warn about."""
    pl.seed_everything(0)
    agent = small_sac(200, init_random_frames=80, zero_mean_start=True, initial_scale=0.01, actor_delay_frames=1_000)
    assert agent.collector_options() == {"init_random_frames": 100}
    recorder = ActionRecorder()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="init_random_frames")
        cpu_trainer(callbacks=[recorder], limit_val_batches=0).fit(agent)
    assert recorder.largest[50] > 1.0 and recorder.largest[100] < 0.1  # two rollouts random, then the policy
    assert agent.updates_done == 150  # as with 100: learning starts once 80 frames are stored, at the 100th
