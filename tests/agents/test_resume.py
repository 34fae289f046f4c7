"""Resume loses nothing: same losses after an episode-boundary checkpoint, buffer and counters kept mid-episode."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from agents_testkit import BatchRecorder, StopAtFrames, cpu_trainer, frame_checkpoint, small_sac

LOSS_KEYS = ("train/loss_actor", "train/loss_qvalue", "train/loss_alpha", "train/alpha")


def test_resume_at_episode_boundary_repeats_the_uninterrupted_losses(tmp_path):
    budget, stop_at = 350, 200  # episodes of 50 frames = one rollout each: every checkpoint is at a boundary
    pl.seed_everything(11)
    uninterrupted = BatchRecorder()
    cpu_trainer(callbacks=[uninterrupted]).fit(small_sac(budget))

    pl.seed_everything(11)
    interrupted = small_sac(budget)
    cpu_trainer(tmp_path, callbacks=[frame_checkpoint(tmp_path, 100), StopAtFrames(stop_at)]).fit(interrupted)
    assert interrupted.frames_done == stop_at

    pl.seed_everything(999)  # the checkpoint, not the seed, must decide what happens next
    resumed = small_sac(budget)
    recorder = BatchRecorder()
    cpu_trainer(tmp_path, callbacks=[frame_checkpoint(tmp_path, 100), recorder]).fit(resumed, ckpt_path="last")

    assert sorted(recorder.outputs) == [250, 300, 350]
    for frames, outputs in recorder.outputs.items():
        for key in LOSS_KEYS:
            assert outputs[key] == pytest.approx(uninterrupted.outputs[frames][key], rel=1e-6, abs=1e-9), (frames, key)
    assert resumed.updates_done == 350  # learning starts once the 50 random frames are stored: one update per frame


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
    assert resumed.episodes_done >= first.episodes_done


def test_a_checkpoint_restores_every_counter_it_saved(tmp_path):
    """Loading puts back exactly what was saved: frames, updates, episodes, the last return, the skip count."""
    pl.seed_everything(5)
    first = small_sac(300, episode_steps=50, frames_per_batch=30)
    cpu_trainer(tmp_path, callbacks=[frame_checkpoint(tmp_path, 90), StopAtFrames(120)]).fit(first)
    first.nonfinite.skipped_total = 3  # as if three updates had been skipped (the guard's own count)
    checkpoint = {"state_dict": first.state_dict()}  # what Lightning puts beside the module's own state
    first.on_save_checkpoint(checkpoint)
    assert first.episodes_done >= 2 and first.last_episode_return is not None  # counters worth restoring

    fresh = small_sac(300, episode_steps=50, frames_per_batch=30)
    fresh.on_load_checkpoint(checkpoint)
    for counter in ("frames_done", "updates_done", "episodes_done", "last_episode_return", "at_episode_boundary"):
        assert getattr(fresh, counter) == getattr(first, counter), counter
    assert fresh.nonfinite.skipped_total == 3
    assert len(fresh.replay_buffer) == len(first.replay_buffer) == 120
