"""The replay buffer lives on the host, is sized before the run, and checkpoints only its filled part."""

from __future__ import annotations

import pytest
import torch
from agents_testkit import cpu_trainer, frame_checkpoint, small_sac

from iquitos_lightning.agents import ReplayBufferConfig
from iquitos_lightning.agents.replay import (
    ReplayBufferTooLarge,
    buffer_contents,
    buffer_footprint,
    bytes_per_transition,
    check_footprint,
    make_replay_buffer,
    restore_buffer,
    storage_device,
)


def test_checkpoint_of_a_1m_buffer_holding_1k_transitions_is_small(tmp_path):
    big_buffer = ReplayBufferConfig(capacity=1_000_000)
    agent = small_sac(1_000, frames_per_batch=500, buffer=big_buffer, init_random_frames=1_000)
    cpu_trainer(tmp_path, callbacks=[frame_checkpoint(tmp_path, 1_000)]).fit(agent)
    assert len(agent.replay_buffer) == 1_000
    size = (tmp_path / "checkpoints" / "last.ckpt").stat().st_size
    full_capacity = 1_000_000 * 74  # what a state_dict of the storage would write (74 B per Pendulum transition)
    assert size < 2 * 1024**2, f"checkpoint is {size / 1024**2:.1f} MB"
    assert size < full_capacity / 20
    assert storage_device(agent.replay_buffer) == torch.device("cpu")


def test_buffer_storage_is_on_the_cpu_and_only_samples_move():
    agent = small_sac(100)
    rollout = agent.train_env.rollout(64, break_when_any_done=False)
    agent.replay_buffer.extend(rollout)
    assert storage_device(agent.replay_buffer) == torch.device("cpu")
    sample = agent.replay_buffer.sample()
    assert sample.batch_size == torch.Size([32])
    moved = sample.to("meta")  # stands in for the accelerator: the sample moves, the storage does not
    assert moved.device == torch.device("meta")
    assert storage_device(agent.replay_buffer) == torch.device("cpu")


def test_buffer_contents_round_trip_keeps_order_and_cursor():
    buffer = make_replay_buffer(ReplayBufferConfig(capacity=8), batch_size=4)
    from tensordict import TensorDict

    buffer.extend(TensorDict({"x": torch.arange(11.0).unsqueeze(-1)}, batch_size=[11]))  # wraps around
    contents = buffer_contents(buffer)
    assert contents["filled"] == 8 and contents["cursor"] == 3
    restored = make_replay_buffer(ReplayBufferConfig(capacity=8), batch_size=4)
    restore_buffer(restored, contents)
    torch.testing.assert_close(restored.storage.get(slice(0, 8))["x"], buffer.storage.get(slice(0, 8))["x"])
    restored.extend(TensorDict({"x": torch.tensor([[99.0]])}, batch_size=[1]))
    assert float(restored.storage.get(slice(3, 4))["x"]) == 99.0  # the next write lands where the cursor was


def test_a_buffer_larger_than_ram_is_refused_with_what_to_change():
    agent = small_sac(100)
    example = agent.train_env.fake_tensordict()
    with torch.no_grad():
        agent.actor(example)
    footprint = buffer_footprint(ReplayBufferConfig(capacity=10**13), example)
    with torch.no_grad():
        agent.replay_buffer.extend(agent.actor(agent.train_env.rollout(3, agent.actor)))
    stored = agent.replay_buffer.storage.get(slice(0, 1))[0]
    assert footprint.bytes_per_transition == bytes_per_transition(stored) > 0
    with pytest.raises(ReplayBufferTooLarge, match="capacity"):
        check_footprint(footprint)
    with pytest.raises(ReplayBufferTooLarge, match="memmap"):
        small_sac(100, buffer=ReplayBufferConfig(capacity=10**13))


def test_memmap_buffer_checks_the_disk(tmp_path):
    example = small_sac(100).train_env.fake_tensordict()
    footprint = buffer_footprint(ReplayBufferConfig(capacity=1000, storage="memmap", memmap_dir=str(tmp_path)), example)
    assert footprint.where == str(tmp_path) and footprint.available_bytes > 0
    check_footprint(footprint)


def test_sac_stores_only_what_its_updates_read_and_resumes_a_buffer_saved_with_every_entry(tmp_path):
    """The collector's rollout holds the policy's location and scale, episode returns and step counts, which no SAC
    update reads: the buffer leaves them out (replay.transition_for_buffer), its footprint counts what it keeps, and
    a buffer saved when every entry was stored refills the leaner one and takes new transitions after it."""
    from tensordict import TensorDict

    from iquitos_lightning.agents.replay import transition_for_buffer

    agent = small_sac(200)
    cpu_trainer(tmp_path).fit(agent)
    assert agent.updates_done > 0  # the updates ran on what was stored
    stored = agent.replay_buffer.storage.get(slice(0, 1))
    kept = set(stored.keys(include_nested=True, leaves_only=True))
    assert {"observation", "action", ("next", "observation"), ("next", "reward"), ("next", "terminated")} <= kept
    assert not kept & {"loc", "scale", "step_count", ("next", "episode_reward"), ("next", "truncated")}
    example = agent.train_env.fake_tensordict()
    with torch.no_grad():
        agent.actor(example)
    footprint = buffer_footprint(ReplayBufferConfig(capacity=10), example, agent.stored_keys())
    assert footprint.bytes_per_transition == bytes_per_transition(stored[0]) < bytes_per_transition(example)

    with torch.no_grad():
        rollout = agent.actor(agent.train_env.rollout(6, agent.actor))
    saved_before = make_replay_buffer(ReplayBufferConfig(capacity=10), batch_size=4)
    saved_before.extend(transition_for_buffer(rollout))  # every entry, as before
    restored = make_replay_buffer(ReplayBufferConfig(capacity=10), batch_size=4)
    restore_buffer(restored, buffer_contents(saved_before), agent.stored_keys())
    restored.extend(transition_for_buffer(rollout, agent.stored_keys()))
    assert len(restored) == 10
    assert set(restored.storage.get(slice(0, 1)).keys(include_nested=True, leaves_only=True)) == kept
    assert isinstance(restored.sample(), TensorDict)
