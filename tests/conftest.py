"""Suite-wide settings: W&B never reaches the network from a test.

Tests run with ``WANDB_MODE=disabled`` (no W&B process per run, faster); the tests of tracking itself
set ``offline`` with ``monkeypatch``. Online mode without a network would hang ~90 s (measured with wandb 0.31).
"""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

os.environ["WANDB_MODE"] = "disabled"
os.environ["WANDB_SILENT"] = "true"

# Tests name configs/ and data/ relative to the repository, as a user's commands do: run them from any folder.
REPO = Path(__file__).resolve().parents[1]
os.chdir(REPO)

# The suite runs in parallel (pyproject: ``-n auto --dist loadfile``, one worker per core). Each worker gets its
# share of the cores for torch's intra-op threads: workers x threads = cores, never more threads than cores.
# Subprocesses (the CLI tests, collector workers) inherit the share through OMP_NUM_THREADS: two processes each
# spinning two OpenMP threads on two cores ran SAC updates ~4x slower than one thread each (measured here).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _THREADS = max(1, (os.cpu_count() or 1) // _WORKERS)
    torch.set_num_threads(_THREADS)
    os.environ["OMP_NUM_THREADS"] = str(_THREADS)


@pytest.fixture(autouse=True)
def _torch_threads_restored() -> Iterator[None]:
    """A test that pins torch to one thread (tiny networks) must not leave the rest of the session pinned."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
