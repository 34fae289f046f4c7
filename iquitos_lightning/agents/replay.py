"""The replay buffer: on the host by design, sized and checked before a run starts, saved by its filled part.

Why: the earlier project kept a 500k-transition buffer on an 8 GB laptop GPU and slowed 85x as it
filled. Here the buffer is a TorchRL ``TensorDictReplayBuffer`` on a CPU ``LazyTensorStorage`` (RAM)
or a ``LazyMemmapStorage`` (a file on disk); only sampled batches move to the accelerator. Its full
size (capacity x bytes per transition) is estimated from one fake transition of the env and refused
up front when RAM (or disk, for memmap) cannot hold it, instead of dying hours later.
Checkpoints store ``buffer[:len(buffer)]`` and the write cursor, never the capacity: a 1M buffer
holding 1k transitions saves as about a megabyte (its ``state_dict`` would write the whole 1M).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase
from torchrl.data import LazyMemmapStorage, LazyTensorStorage, TensorDictReplayBuffer

from iquitos_lightning.errors import ConfigError
from iquitos_lightning.fastpath.replay_cursor import set_write_cursor, write_cursor
from iquitos_lightning.profile.hardware import GIB, detect_device

# Keys the collector adds that no loss reads (trajectory ids restart on resume): kept out of the buffer.
EXCLUDED_KEYS = ("collector",)
# Refuse a buffer that would take more than this share of what is available (RAM or disk).
MAX_SHARE_OF_AVAILABLE = 0.8


class ReplayBufferTooLarge(ConfigError, MemoryError):
    """The configured replay buffer cannot fit in host RAM (or on disk for memmap)."""


@dataclass
class ReplayBufferConfig:
    """Where and how big the replay buffer is."""

    capacity: int = 1_000_000  # transitions kept; the oldest are overwritten when full
    storage: str = "memory"  # "memory": host RAM (LazyTensorStorage on cpu); "memmap": a file under memmap_dir
    memmap_dir: str | None = None  # folder of the memmap file (None: a temporary folder)


STORAGES = ("memory", "memmap")


def check_buffer_config(config: ReplayBufferConfig, batch_size: int) -> None:
    """Refuse a buffer that cannot work before anything is allocated, naming the field."""
    if config.storage not in STORAGES:
        raise ConfigError(f"model.buffer.storage must be one of {STORAGES}, got {config.storage!r}")
    if config.capacity <= 0:
        raise ConfigError(f"model.buffer.capacity must be a positive number of transitions, got {config.capacity}")
    if batch_size <= 0:
        raise ConfigError(f"model.batch_size must be a positive integer, got {batch_size}")
    if batch_size > config.capacity:
        raise ConfigError(
            f"model.batch_size ({batch_size}) is larger than model.buffer.capacity ({config.capacity}): "
            f"a batch is sampled from the buffer; use a batch_size of at most {config.capacity} or a larger capacity"
        )


def transition_for_buffer(transitions: TensorDictBase, keys: Sequence[NestedKey] | None = None) -> TensorDictBase:
    """What is stored per transition: the entries learning reads (``keys``, those the transitions have), or with
    ``keys`` None everything but collector bookkeeping; one row per transition.

    Why only what learning reads: every stored entry is gathered again for every sampled row, one memory access per
    row and entry wherever the row lies in the buffer. The collector's rollout also holds the policy's location and
    scale, episode returns, step counts and truncation flags, which no SAC update reads: on the tariff profile 12 of
    18 entries, whose gathering and splitting took ~0.8 % of a SAC rollout's time in a run (docs/performance.md).

    A batched env (the twin) gives rollouts of shape [envs, time]: flattened, so the buffer stores
    transitions and not whole per-env sequences.
    """
    kept = transitions.exclude(*EXCLUDED_KEYS) if keys is None else transitions.select(*keys, strict=False)
    return kept.reshape(-1)


def bytes_per_transition(example: TensorDictBase, keys: Sequence[NestedKey] | None = None) -> int:
    """Bytes one stored transition takes, from an example transition (of a batched env: per transition) and the
    entries stored (:func:`transition_for_buffer`'s ``keys``).

    ``TensorDictReplayBuffer`` also stores each item's int64 ``index``: counted when the example lacks it.
    """
    rows = max(example.numel(), 1)  # a batched env (the twin) gives one transition per env
    leaves = transition_for_buffer(example, keys).values(include_nested=True, leaves_only=True)
    index_bytes = 0 if "index" in example.keys() else torch.empty((), dtype=torch.int64).element_size()
    return int(sum(leaf.numel() * leaf.element_size() for leaf in leaves)) // rows + index_bytes


@dataclass(frozen=True)
class BufferFootprint:
    capacity: int
    bytes_per_transition: int
    available_bytes: int
    where: str  # "RAM" or the memmap folder

    @property
    def total_bytes(self) -> int:
        return self.capacity * self.bytes_per_transition

    def describe(self) -> str:
        return (
            f"replay buffer: {self.capacity:,} transitions x {self.bytes_per_transition:,} B = "
            f"{self.total_bytes / GIB:.2f} GiB in {self.where} ({self.available_bytes / GIB:.1f} GiB available)"
        )


def buffer_footprint(
    config: ReplayBufferConfig, example: TensorDictBase, keys: Sequence[NestedKey] | None = None
) -> BufferFootprint:
    """Estimate the buffer's full size (storing ``keys`` of each transition) and what is available where it will
    live."""
    per_transition = bytes_per_transition(example, keys)
    if config.storage == "memory":
        available = detect_device(prefer_cuda=False).host_available_bytes
        return BufferFootprint(config.capacity, per_transition, available, "RAM")
    if config.storage == "memmap":
        folder = Path(config.memmap_dir) if config.memmap_dir else Path("/tmp")
        existing = next((p for p in (folder, *folder.parents) if p.exists()), Path("/"))
        return BufferFootprint(config.capacity, per_transition, shutil.disk_usage(existing).free, str(folder))
    raise ConfigError(f"model.buffer.storage must be one of {STORAGES}, got {config.storage!r}")


def check_footprint(footprint: BufferFootprint) -> None:
    """Refuse a buffer that cannot fit, saying what to change."""
    if footprint.total_bytes > MAX_SHARE_OF_AVAILABLE * footprint.available_bytes:
        raise ReplayBufferTooLarge(
            f"{footprint.describe()}: more than {MAX_SHARE_OF_AVAILABLE:.0%} of what is available. "
            "Lower --model.buffer.capacity, or use --model.buffer.storage memmap with a memmap_dir on a larger disk."
        )


def make_replay_buffer(config: ReplayBufferConfig, batch_size: int) -> TensorDictReplayBuffer:
    """A uniform replay buffer whose storage is on the CPU (RAM or memmap), never on an accelerator."""
    if config.storage == "memory":
        storage: Any = LazyTensorStorage(config.capacity, device="cpu")
    elif config.storage == "memmap":
        storage = LazyMemmapStorage(config.capacity, scratch_dir=config.memmap_dir, device="cpu")
    else:
        raise ConfigError(f"model.buffer.storage must be one of {STORAGES}, got {config.storage!r}")
    return TensorDictReplayBuffer(storage=storage, batch_size=batch_size)


def buffer_contents(buffer: TensorDictReplayBuffer) -> dict[str, Any]:
    """The filled part of the buffer and its write cursor, as plain tensors (safe for ``weights_only`` loads)."""
    filled = len(buffer)
    data = buffer.storage.get(slice(0, filled)).clone().to_dict() if filled else {}
    return {"filled": filled, "cursor": write_cursor(buffer), "data": data}


def restore_buffer(
    buffer: TensorDictReplayBuffer, contents: dict[str, Any], keys: Sequence[NestedKey] | None = None
) -> None:
    """Refill an empty buffer from :func:`buffer_contents` (same storage order, same cursor), keeping the entries
    the buffer stores now (``keys`` as :func:`transition_for_buffer`'s): a checkpoint written when every entry was
    stored resumes into a buffer of fewer."""
    filled = int(contents["filled"])
    if filled:
        if filled > buffer.storage.max_size:
            capacity = buffer.storage.max_size
            raise ValueError(f"checkpoint holds {filled} transitions but the buffer capacity is {capacity}")
        saved = TensorDict(contents["data"], batch_size=[filled])
        buffer.extend(saved if keys is None else saved.select(*keys, "index", strict=False))
    set_write_cursor(buffer, int(contents["cursor"]))


def storage_device(buffer: TensorDictReplayBuffer) -> torch.device:
    """Device of the stored data (or of the storage's setting before the first write)."""
    storage = buffer.storage
    if len(buffer):
        return storage.get(slice(0, 1)).device
    return torch.device(storage.device)
