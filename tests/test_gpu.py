"""CUDA-only checks (``pytest -m gpu`` on a GPU machine; skipped without CUDA): the memory cap that stands a large GPU
in for the 8 GB RTX 4060 (``gpu-check``'s own CUDA test is in tests/benchmarks/test_gpu_check.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from iquitos_lightning.profile.hardware import MEMORY_CAP_ENV

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

CAPPED_PROCESS = """
import torch
from iquitos_lightning.profile.hardware import apply_memory_cap, detect_device
cap = apply_memory_cap()
device = detect_device()
print(device.total_memory_bytes == cap, device.free_memory_bytes <= cap)
try:
    torch.empty(2 * cap, dtype=torch.uint8, device="cuda")
    print("allocated beyond the cap")
except torch.OutOfMemoryError:
    print("refused beyond the cap")
"""


def test_the_memory_cap_makes_the_gpu_read_and_fail_as_a_smaller_card() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", CAPPED_PROCESS],
        env={**os.environ, MEMORY_CAP_ENV: "1"},
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert completed.stdout.split() == ["True", "True", "refused", "beyond", "the", "cap"]
