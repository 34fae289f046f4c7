"""Resume loses nothing: same losses after an episode-boundary checkpoint, buffer and counters kept mid-episode."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from agents_testkit import BatchRecorder, StopAtFrames, cpu_trainer, frame_checkpoint, small_sac
from tensordict import TensorDict

from iquitos_lightning.agents import PPO, SAC, EnvConfig, RLAgent, RolloutConfig
from iquitos_lightning.envs.env_config import Backend, Episodes

LOSS_KEYS = ("train/loss_actor", "train/loss_qvalue", "train/loss_alpha", "train/alpha")


def uninterrupted_and_resumed(
    make_agent: Callable[[int], RLAgent], budget: int, every_n_frames: int, stop_at: int, root: Path
) -> tuple[BatchRecorder, RLAgent, BatchRecorder, RLAgent]:
    """One run to ``budget``; the same run (same seed) stopped at ``stop_at`` with a checkpoint every
    ``every_n_frames`` and resumed from its last checkpoint under another seed. Each run's outputs and agent."""
    pl.seed_everything(11)
    uninterrupted = BatchRecorder()
    uninterrupted_model = make_agent(budget)
    cpu_trainer(callbacks=[uninterrupted]).fit(uninterrupted_model)

    pl.seed_everything(11)
    interrupted = make_agent(budget)
    cpu_trainer(root, callbacks=[frame_checkpoint(root, every_n_frames), StopAtFrames(stop_at)]).fit(interrupted)
    assert interrupted.frames_done == stop_at

    pl.seed_everything(999)  # the checkpoint, not the seed, must decide what happens next
    resumed = make_agent(budget)
    recorder = BatchRecorder()
    cpu_trainer(root, callbacks=[frame_checkpoint(root, every_n_frames), recorder]).fit(resumed, ckpt_path="last")
    return uninterrupted, uninterrupted_model, recorder, resumed


def test_resume_at_episode_boundary_repeats_the_uninterrupted_losses(tmp_path):
    # episodes of 50 frames = one rollout each: every checkpoint is at a boundary
    uninterrupted, uninterrupted_model, recorder, resumed = uninterrupted_and_resumed(
        small_sac, 350, 100, 200, tmp_path
    )
    assert sorted(recorder.outputs) == [250, 300, 350]
    for frames, outputs in recorder.outputs.items():
        for key in LOSS_KEYS:
            assert outputs[key] == pytest.approx(uninterrupted.outputs[frames][key], rel=1e-6, abs=1e-9), (frames, key)
    assert resumed.updates_done == 350  # learning starts once the 50 random frames are stored: one update per frame
    # A restart would also reach 350 frames; only a resume ends with the uninterrupted run's counters and buffer.
    for counter in ("frames_done", "updates_done", "episodes_done", "last_episode_return", "update_credit"):
        assert getattr(resumed, counter) == getattr(uninterrupted_model, counter), counter
    assert resumed.nonfinite.skipped_total == uninterrupted_model.nonfinite.skipped_total
    _assert_same_buffer(resumed, uninterrupted_model)


def _small_ppo(frame_budget: int) -> PPO:
    """PPO on Pendulum with 64-frame episodes and rollouts: every rollout ends at an episode boundary."""
    return PPO(
        env=EnvConfig(name="Pendulum-v1", episodes=Episodes(seed=3, max_steps=64)),
        rollout=RolloutConfig(frame_budget=frame_budget, frames_per_batch=64, eval_every_frames=128, eval_episodes=1),
        hidden_sizes=(16, 16),
        epochs=2,
        minibatch_size=32,
    )


def test_ppo_resume_at_episode_boundary_repeats_the_uninterrupted_run_reward_normaliser_included(tmp_path):
    """The normaliser's statistics come from the checkpoint: a fresh normaliser would divide by another std."""
    uninterrupted, uninterrupted_model, recorder, resumed = uninterrupted_and_resumed(
        _small_ppo, 320, 64, 192, tmp_path
    )
    assert sorted(recorder.outputs) == [256, 320]
    for frames, outputs in recorder.outputs.items():
        assert outputs["train/reward_norm_std"] == uninterrupted.outputs[frames]["train/reward_norm_std"], frames
        for key in ("train/loss_objective", "train/loss_critic"):
            assert outputs[key] == pytest.approx(uninterrupted.outputs[frames][key], rel=1e-6, abs=1e-9), (frames, key)
    assert uninterrupted.outputs[320]["train/reward_norm_std"] != uninterrupted.outputs[64]["train/reward_norm_std"]
    for name, value in uninterrupted_model.reward_normalizer.state_dict().items():
        assert torch.equal(resumed.reward_normalizer.state_dict()[name], value), name
    assert resumed.updates_done == uninterrupted_model.updates_done == 5 * 2 * 2


def _assert_same_buffer(first: SAC, second: SAC) -> None:
    """Same number of stored frames, and every stored key holds the same values in the same slots."""
    assert len(first.replay_buffer) == len(second.replay_buffer)
    stored = slice(0, len(first.replay_buffer))
    ours, theirs = first.replay_buffer.storage.get(stored), second.replay_buffer.storage.get(stored)
    assert set(ours.keys(True, True)) == set(theirs.keys(True, True))
    for key in ours.keys(True, True):
        torch.testing.assert_close(ours[key], theirs[key], rtol=0, atol=0, msg=f"buffer key {key}")


def test_resume_mid_episode_keeps_buffer_and_counters_and_starts_a_fresh_episode(tmp_path):
    pl.seed_everything(5)
    first = small_sac(300, episode_steps=50, frames_per_batch=30)
    cpu_trainer(tmp_path, callbacks=[frame_checkpoint(tmp_path, 90), StopAtFrames(90)]).fit(first)
    checkpoint = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    state = checkpoint["rl_state"]
    assert state["frames_done"] == 90 and not state["at_episode_boundary"]  # 90 = one episode of 50 + 40 frames
    saved_buffer = state["agent"]["replay_buffer"]
    assert saved_buffer["filled"] == 90

    resumed = small_sac(300, episode_steps=50, frames_per_batch=30)
    recorder = BatchRecorder()
    cpu_trainer(tmp_path, callbacks=[recorder], max_steps=-1).fit(resumed, ckpt_path="last")
    first_batch = recorder.first_batch
    assert int(first_batch["step_count"][0]) == 0  # a fresh episode, not the interrupted one's frame 40
    assert min(recorder.outputs) == 120  # counting went on from 90
    assert resumed.frames_done == 300 and len(resumed.replay_buffer) == 300
    restored_part = resumed.replay_buffer.storage.get(slice(0, 90))
    torch.testing.assert_close(restored_part["observation"], saved_buffer["data"]["observation"])
    assert first.episodes_done == 1 and resumed.episodes_done == 5  # + fresh episodes ending at 140, 190, 240, 290


def test_a_checkpoint_restores_every_counter_it_saved(tmp_path):
    """Loading puts back exactly what was saved: frames, updates, episodes, the last return, the skip count."""
    pl.seed_everything(5)
    first = small_sac(300, episode_steps=50, frames_per_batch=30)
    cpu_trainer(tmp_path, callbacks=[frame_checkpoint(tmp_path, 90), StopAtFrames(120)]).fit(first)
    first.nonfinite.skipped_total = 3  # as if three updates had been skipped (the guard's own count)
    first.update_credit = 0.75  # a fractional update carried to the next rollout (updates_per_frame < 1)
    checkpoint = {"state_dict": first.state_dict()}  # what Lightning puts beside the module's own state
    first.on_save_checkpoint(checkpoint)
    assert first.episodes_done >= 2 and first.last_episode_return is not None  # counters worth restoring

    fresh = small_sac(300, episode_steps=50, frames_per_batch=30)
    fresh.on_load_checkpoint(checkpoint)
    for counter in ("frames_done", "updates_done", "episodes_done", "last_episode_return", "at_episode_boundary"):
        assert getattr(fresh, counter) == getattr(first, counter), counter
    assert fresh.nonfinite.skipped_total == 3
    assert fresh.update_credit == 0.75
    assert len(fresh.replay_buffer) == len(first.replay_buffer) == 120


def _overlapping_sac(frame_budget: int) -> SAC:
    sac = small_sac(frame_budget)
    sac.rollout_config.overlap = True
    return sac


def _two_worker_sac(frame_budget: int) -> SAC:
    return small_sac(
        frame_budget,
        env=EnvConfig(name="Pendulum-v1", backend=Backend(num_workers=2), episodes=Episodes(seed=3, max_steps=50)),
    )


@pytest.mark.parametrize("make_sac", [_overlapping_sac, _two_worker_sac], ids=["overlap", "two_workers"])
def test_resume_with_worker_collection_goes_on_from_the_checkpoint(tmp_path, make_sac):
    """Workers restart their episode streams on resume (docs/robustness.md "Resuming a run"), so the run is not the
    uninterrupted one; everything the learner holds must still come from the checkpoint, not from scratch."""
    pl.seed_everything(5)
    first = make_sac(300)
    first.nonfinite.skipped_total = 2  # as if the guard had skipped two updates before the checkpoint
    cpu_trainer(tmp_path, callbacks=[frame_checkpoint(tmp_path, 100), StopAtFrames(200)]).fit(first)
    state = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)["rl_state"]
    assert state["frames_done"] == 200 and state["episodes_done"] == 4  # four 50-frame episodes in 200 frames
    assert state["nonfinite_skipped"] == 2

    pl.seed_everything(999)
    resumed = make_sac(300)
    recorder = BatchRecorder()
    cpu_trainer(tmp_path, callbacks=[recorder], max_steps=-1).fit(resumed, ckpt_path="last")
    assert sorted(recorder.outputs) == [250, 300]  # counting went on from 200
    assert resumed.frames_done == 300 and resumed.updates_done == state["updates_done"] + 100
    assert resumed.episodes_done == 6  # the 4 saved + one fresh 50-frame episode per 50 frames
    assert resumed.last_episode_return is not None
    assert resumed.nonfinite.skipped_total == 2
    restored = resumed.replay_buffer.storage.get(slice(0, 200))
    saved = TensorDict(state["agent"]["replay_buffer"]["data"], batch_size=[200])
    for key in ("observation", "action", ("next", "reward")):
        torch.testing.assert_close(restored[key], saved[key], rtol=0, atol=0, msg=f"buffer key {key}")
