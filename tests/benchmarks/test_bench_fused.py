"""The bench's fused section (the compiled training twin against the eager one, bench/fused_twin.py) runs end to end
on the tiny site: one size, so one compile (it measures nothing here: the ratios are read from the full bench's
printout, never asserted). Its own file, so pytest-xdist runs its compile beside the other bench tests."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.bench.run import BenchConfig, run_bench

pytestmark = pytest.mark.slow


def test_the_fused_section_prints_both_twins_rates_the_compile_and_bit_equality(tmp_path: Path) -> None:
    config = replace(BenchConfig.quick(), sections=("fused",), data_root=str(tmp_path / "data"))
    text, figures = run_bench(config)
    assert "### Fused vs eager training twin frames/s (tiny, collector, random policy)" in text
    (row,) = figures["fused_twin"]
    assert (row["num_envs"], row["status"], row["threads"], row["rounds"]) == (4, "measured", 1, 1)
    assert row["eager_frames_per_s"] > 0 and row["fused_frames_per_s"] > 0
    assert row["eager_frames_per_cpu_s"] > 0 and row["fused_frames_per_cpu_s"] > 0
    assert row["ratio"] == row["fused_frames_per_s"] / row["eager_frames_per_s"]
    assert row["compile_s"] > 0  # the fused twin's first rollout compiled its step
    assert row["bit_equal"] is True  # the same random actions gave the same first rollout
    line = next(line for line in text.splitlines() if line.startswith("| 4 |"))
    assert f"{row['ratio']:.2f}x" in line and "| yes |" in line
