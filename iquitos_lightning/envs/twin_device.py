"""A twin's tensors on another device: moving them, counting their bytes, and the count estimated from sizes alone.

Why: an agent builds its networks from the training twin's specs on the CPU and learns its device only when Lightning
places it, so the twin is moved, not built there (``IquitosTwin.to``, ``env.backend.device: training``). Every tensor
it holds is a plain attribute of a few holders (the twin, its state, its tables, its physics models), which
``nn.Module.to`` does not reach; the same holders give the bytes a fit's memory check counts before the move
(profile/memory_budget.py), and :func:`twin_device_bytes` estimates them for the auto profile, which builds no site.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

# float64 [B, 1 + S] arrays a step keeps alive at once, counted generously (the step makes about 40 such temporaries;
# the allocator reuses most of them): the working set :meth:`IquitosTwin.device_bytes` adds to the tables.
STEP_WORKING_ARRAYS = 64
# Bytes of one row (one hour of one year) of the twin's tables beyond the observation's float32 columns: per socket
# the plugged flag, required SOC, hours left, departing and arriving flags, arrival SOCs (1 + 8 + 8 + 1 + 1 + 4 + 4),
# and per hour the series, window and period columns, start peaks, baseline and the critic's hindsight (counted high).
TABLE_BYTES_PER_SOCKET_ROW = 27
TABLE_BYTES_PER_HOUR_ROW = 512


def resolved_device(device: str | torch.device) -> torch.device:
    """``device`` as a ``torch.device``, a bare ``cuda`` with the current card's index (how a moved tensor reports
    its device, so that a twin already there is recognised)."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def move_tensors(holders: Iterable[Any], device: torch.device) -> None:
    """Every tensor attribute of every holder moved to ``device``, in place of the attribute."""
    for holder in holders:
        for name, value in list(vars(holder).items()):
            if isinstance(value, torch.Tensor):
                vars(holder)[name] = value.to(device)


def held_bytes(holders: Iterable[Any]) -> int:
    """Bytes of every tensor attribute of every holder."""
    return sum(
        value.numel() * value.element_size()
        for holder in holders
        for value in vars(holder).values()
        if isinstance(value, torch.Tensor)
    )


def step_working_bytes(envs: int, sockets: int) -> int:
    """A step's working set: :data:`STEP_WORKING_ARRAYS` float64 arrays of [B, 1 + S] alive at once, with margin."""
    return STEP_WORKING_ARRAYS * envs * (1 + sockets) * 8


def twin_device_bytes(*, rows: int, sockets: int, observation_width: int) -> tuple[int, int]:
    """What :meth:`IquitosTwin.device_bytes` will be, from sizes alone (no site built; the auto profile's input):
    (the tables' bytes for ``rows`` = years x hours, the bytes per env of state and a step's working set).
    ``tests/envs/test_device_twin.py`` holds it at or above the measured bytes."""
    tables = rows * (observation_width * 4 + sockets * TABLE_BYTES_PER_SOCKET_ROW + TABLE_BYTES_PER_HOUR_ROW)
    per_env = observation_width * 4 + (1 + sockets) * (4 + STEP_WORKING_ARRAYS * 8) + 64
    return tables, per_env
