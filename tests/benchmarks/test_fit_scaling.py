"""bench's fit table: the card's PPO fit at each num_envs, a process each through the CLI, frames/s from the probe."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.bench.fit_scaling import measure_fit_scaling
from benchmarks.bench.report import fit_scaling_section
from tests.benchmarks.tiny_profile import tiny_twin_profile


@pytest.mark.slow
def test_each_size_is_one_fit_of_the_profile_with_only_num_envs_changed(tmp_path: Path) -> None:
    rollout = {"frame_budget": 512, "frames_per_batch": 32, "eval_every_frames": 512}
    path = tiny_twin_profile(tmp_path / "tiny_ppo.yaml", "PPO", rollout, epochs=1, minibatch_size=16)
    rows = measure_fit_scaling((2, 4), str(path))
    assert [(row.num_envs, row.status) for row in rows] == [(2, "measured"), (4, "measured")]
    assert all(row.frames_per_s > 0 and row.timed_rollouts == 3 for row in rows)
    assert rows[0].ratio_to_first == 1.0 and rows[1].ratio_to_first == rows[1].frames_per_s / rows[0].frames_per_s
    text = fit_scaling_section(rows)
    assert "| 2 |" in text and "| 4 |" in text
