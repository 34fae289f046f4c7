"""The replay buffer's write cursor (fastpath/replay_cursor.py): a restored buffer writes where the original would."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from iquitos_lightning.agents.replay import ReplayBufferConfig, buffer_contents, make_replay_buffer, restore_buffer
from iquitos_lightning.fastpath.replay_cursor import write_cursor


def _transitions(first: int, count: int) -> TensorDict:
    return TensorDict({"value": torch.arange(first, first + count, dtype=torch.float32)}, batch_size=[count])


def test_a_restored_wrapped_buffer_overwrites_the_same_slots() -> None:
    config = ReplayBufferConfig(capacity=5)
    original = make_replay_buffer(config, batch_size=2)
    original.extend(_transitions(0, 7))  # wraps: slots 0-1 overwritten, the next write goes to slot 2
    assert write_cursor(original) == 2
    restored = make_replay_buffer(config, batch_size=2)
    restore_buffer(restored, buffer_contents(original))
    assert write_cursor(restored) == 2
    original.extend(_transitions(100, 2))
    restored.extend(_transitions(100, 2))
    assert torch.equal(original.storage.get(slice(0, 5))["value"], restored.storage.get(slice(0, 5))["value"])
    assert original.storage.get(slice(0, 5))["value"].tolist() == [5.0, 6.0, 100.0, 101.0, 4.0]
