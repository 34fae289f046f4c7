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


@pytest.fixture(autouse=True)
def _torch_threads_restored() -> Iterator[None]:
    """A test that pins torch to one thread (tiny networks) must not leave the rest of the session pinned."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
