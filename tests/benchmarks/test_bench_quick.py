"""The bench's code runs end to end on tiny sizes (it measures nothing here: speed goals are read from
the printed ratios of the full bench, never asserted by tests)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.bench.run import BenchConfig, run_bench
from benchmarks.bench.sb3 import sb3_available
from iquitos_lightning.__main__ import main

pytestmark = pytest.mark.slow


def test_quick_bench_prints_every_section(tmp_path: Path) -> None:
    config = replace(BenchConfig.quick(), data_root=str(tmp_path / "data"))
    text, figures = run_bench(config)
    for title in (
        "### Machine",
        "### Environment steps/s",
        "### Training throughput",
        "### Peak memory",
        "### Collection",
    ):
        assert title in text
    assert set(figures) >= {"env", "memory", "workers", "machine", "seconds"}
    assert "twin (vectorized)" in text
    assert "### Training twin frames/s vs num_envs" in text  # the card's twin stepped by a collector, per batch size
    scaling = figures["twin_scaling"]
    assert [(row["device"], row["num_envs"], row["status"]) for row in scaling] == [
        ("cpu", 4, "measured"), ("cpu", 16, "measured"),
    ]  # fmt: skip
    assert scaling[0]["ratio_to_first"] == 1.0 and scaling[1]["frames_per_s"] > 0
    assert "TorchRL layer over IquitosEnv" in text
    site_speeds = [speed for speed in figures["env"] if "overhead" in speed]  # the twin's row has none
    assert site_speeds and all("torchrl_over_gym" in speed["overhead"] for speed in site_speeds)
    if sb3_available():
        assert [row["settings"]["algorithm"] for row in figures["training"]] == ["SAC", "PPO", "A2C"]
        assert all(row["frames_ratio"] > 0 and row["updates_ratio"] > 0 for row in figures["training"])
    else:
        assert "install-bench.sh" in text
    assert [point["capacity"] for point in figures["memory"]] == [1_000, 2_000]
    assert [row["workers"] for row in figures["workers"]] == [1, 2]


def test_bench_is_a_command_of_the_module_entry(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--help"])
    assert exit_info.value.code == 0
    assert "--quick" in capsys.readouterr().out
