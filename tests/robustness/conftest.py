"""One torch thread for the robustness tests: their networks are tiny, and on a shared 2-core runner a second
intra-op thread only spins against the other processes (measured: a 150-frame SAC fit took 10x longer)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def single_torch_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
