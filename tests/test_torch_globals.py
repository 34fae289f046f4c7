"""The suite's autouse fixture (tests/conftest.py) puts torch's process-wide settings back after every test: the
first test below changes them all, the second (same file, so same worker, run after it) finds them as before."""

from __future__ import annotations

from collections.abc import Callable

import torch

BEFORE: dict[str, object] = {}


def test_a_test_changes_every_global_torch_setting(read_torch_globals: Callable[[], dict[str, object]]) -> None:
    BEFORE.update(read_torch_globals())
    torch.set_num_threads(2 if BEFORE["threads"] == 1 else 1)
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    torch.set_float32_matmul_precision("medium" if BEFORE["matmul_precision"] != "medium" else "high")
    torch.backends.cudnn.allow_tf32 = not BEFORE["cudnn_tf32"]
    torch.backends.cudnn.benchmark = not BEFORE["cudnn_benchmark"]
    enabled, warn_only = BEFORE["deterministic"]
    torch.use_deterministic_algorithms(not enabled, warn_only=not warn_only)
    changed = read_torch_globals()
    assert [name for name in BEFORE if changed[name] == BEFORE[name]] == [], changed


def test_the_next_test_finds_them_as_they_were(read_torch_globals: Callable[[], dict[str, object]]) -> None:
    assert BEFORE, "runs after the test above"
    assert read_torch_globals() == BEFORE
    assert torch.zeros(1).dtype == torch.float32 and torch.zeros(1, requires_grad=True).sum().requires_grad
