"""VRAMMonitor: logs real process memory on CPU, warns once past the threshold, turns CUDA numbers into metrics."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from callbacks_testkit import TinyRegression, logged_rows, make_trainer

from iquitos_lightning.callbacks import VRAMMonitor
from iquitos_lightning.training.callbacks.vram import GIB, cpu_reading, crossed_threshold, cuda_reading, read_memory


def test_cpu_run_logs_resident_memory_every_n_batches(tmp_path: Path) -> None:
    monitor = VRAMMonitor(log_every_n_steps=5)
    trainer = make_trainer(tmp_path, [monitor], max_steps=20)
    trainer.fit(TinyRegression())

    rows = [row for row in logged_rows(trainer) if "memory/rss_gb" in row]
    assert len(rows) == 1 + 20 // 5  # once at start, then every 5th batch
    for row in rows:
        assert 0 < row["memory/rss_gb"] <= row["memory/peak_rss_gb"]
        assert 0 < row["memory/rss_fraction"] < 1
        assert row["memory/host_total_gb"] > row["memory/rss_gb"]
    assert not any(key.startswith("vram/") for row in rows for key in row)
    assert monitor.measures is not None and "resident memory" in monitor.measures
    assert monitor.latest is not None and monitor.latest.kind == "cpu"


def test_warning_fires_once_when_usage_passes_threshold(tmp_path: Path) -> None:
    monitor = VRAMMonitor(log_every_n_steps=2, threshold_fraction=1e-9)  # any process is above this
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # so a second emission would be recorded, not deduplicated
        make_trainer(tmp_path, [monitor], max_steps=10).fit(TinyRegression())
    memory_warnings = [str(warning.message) for warning in caught if "warning threshold" in str(warning.message)]
    assert len(memory_warnings) == 1
    assert "resident memory" in memory_warnings[0]
    assert monitor.warned


def test_no_warning_below_threshold(tmp_path: Path) -> None:
    monitor = VRAMMonitor(log_every_n_steps=2, threshold_fraction=1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_trainer(tmp_path, [monitor], max_steps=6).fit(TinyRegression())
    assert not [warning for warning in caught if "warning threshold" in str(warning.message)]
    assert not monitor.warned


def test_cuda_numbers_become_metrics_and_threshold_uses_device_usage() -> None:
    reading = cuda_reading(2 * GIB, 3 * GIB, 4 * GIB, device_used_bytes=int(7.5 * GIB), device_total_bytes=8 * GIB)
    assert reading.metrics == {
        "vram/allocated_gb": 2.0,
        "vram/reserved_gb": 3.0,
        "vram/peak_gb": 4.0,
        "vram/device_used_gb": 7.5,
        "vram/device_total_gb": 8.0,
        "vram/device_used_fraction": 0.9375,
    }
    assert crossed_threshold(reading, 0.9)
    assert not crossed_threshold(reading, 0.95)
    assert reading.short_text() == "7.5/8.0 GB"


def test_cuda_without_device_figures_falls_back_to_reserved() -> None:
    with_total = cuda_reading(1 * GIB, 6 * GIB, 2 * GIB, device_total_bytes=8 * GIB)
    assert "vram/device_used_gb" not in with_total.metrics
    assert with_total.used_fraction == 0.75
    unknown_total = cuda_reading(1 * GIB, 6 * GIB, 2 * GIB)
    assert unknown_total.used_fraction is None
    assert not crossed_threshold(unknown_total, 0.01)


def test_cpu_peak_is_never_below_current() -> None:
    reading = cpu_reading(rss_bytes=3 * GIB, peak_rss_bytes=2 * GIB, host_total_bytes=12 * GIB)
    assert reading.metrics["memory/peak_rss_gb"] == 3.0
    assert reading.metrics["memory/rss_fraction"] == 0.25


@pytest.mark.parametrize(
    "arguments", [{"log_every_n_steps": 0}, {"threshold_fraction": 0.0}, {"threshold_fraction": 1.5}]
)
def test_invalid_settings_are_refused(arguments: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        VRAMMonitor(**arguments)  # type: ignore[arg-type]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_reading_sees_an_allocation() -> None:
    device = torch.device("cuda", torch.cuda.current_device())
    before, measures = read_memory(device)
    block = torch.empty(256 * 1024**2, dtype=torch.uint8, device=device)
    after, _ = read_memory(device)
    assert after.kind == "cuda" and "CUDA memory" in measures
    assert after.metrics["vram/allocated_gb"] - before.metrics["vram/allocated_gb"] >= 0.24
    assert after.metrics["vram/peak_gb"] >= after.metrics["vram/allocated_gb"]
    assert 0 < after.metrics["vram/device_used_gb"] <= after.metrics["vram/device_total_gb"]
    del block
