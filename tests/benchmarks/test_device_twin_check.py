"""``gpu-check --only device-twin`` and the bench's twin table: the CPU path runs here (the twin's frames/s against
num_envs, the GPU fits reported skipped), one device fit runs through the CLI on the tiny site (its probe's frames/s,
its time stop and the bill its final test wrote), and the plan a GPU loan runs is the one docs/performance.md names."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.gpu_check import device_twin_check
from benchmarks.gpu_check.report import device_twin_section
from benchmarks.gpu_check.run import CheckRun, _run_and_read, device_twin
from tests.benchmarks.tiny_profile import tiny_twin_profile


@pytest.mark.slow
@pytest.mark.cpu_only  # the CPU path; a GPU loan runs the CUDA one (gpu-check --only device-twin)
def test_without_cuda_the_section_times_the_twin_on_the_cpu_and_reports_the_fits_skipped(tmp_path: Path) -> None:
    run = CheckRun(out=tmp_path, cap_gib=8.0, jobs=1, quick=True, cuda=False)
    section = device_twin(run)
    rows = section["twin"]["rows"]
    assert [(row["device"], row["num_envs"], row["status"]) for row in rows] == [
        ("cpu", 4, "measured"), ("cpu", 16, "measured"),
    ]  # fmt: skip
    assert all(row["frames_per_s"] > 0 for row in rows) and rows[0]["ratio_to_first"] == 1.0
    assert "CUDA" in section["fits"]["skipped"]
    text = device_twin_section(section)
    assert "| cpu | 16 |" in text and "Fits: skipped" in text


@pytest.mark.slow
def test_a_device_fit_runs_through_the_cli_stops_by_time_and_reads_its_bill(tmp_path: Path) -> None:
    """The path each GPU fit takes (the overrides, the probe's time stop, the final test's kpis.json), on the CPU."""
    rollout = {"frame_budget": 512, "frames_per_batch": 64, "eval_every_frames": 512, "eval_episodes": 1,
               "max_eval_steps": 1000}  # fmt: skip
    path = tiny_twin_profile(tmp_path / "tiny_a2c.yaml", "A2C", rollout)
    (planned,) = device_twin_check.fit_plan(((str(path), "capped"),))
    planned["stop_after_s"] = 0.3
    run = CheckRun(out=tmp_path / "out", cap_gib=8.0, jobs=1, quick=True, cuda=False)

    def child(command: list[str], result_file: Path, log: Path, timeout_s: int) -> dict:
        return _run_and_read(command, result_file, log, run.child_env(), timeout_s)

    row = device_twin_check.run_fit(planned, tmp_path / "raw", child)
    assert "error" not in row, row
    assert row["stopped_by_time_at_frames"] == row["frames_done"] < 100_000 * 64  # stopped by the probe, not budget
    assert row["frames_per_s"] > 0 and row["frames_per_fit_s"] > 0 and row["timed_rollouts"] >= 1
    assert row["bill_pen"] > 0 and row["demand_charge_pen"] > 0  # the final test ran on the development year
    text = device_twin_section({"twin": {"error": "not run"}, "fits": [row], "verdict": {}})
    assert "| tiny_a2c | 32-true |" in text and f"{row['bill_pen']:,.0f}" in text


def test_the_plan_runs_the_card_ppo_for_its_whole_budget_and_caps_the_others() -> None:
    plan = device_twin_check.fit_plan()
    assert [(fit["profile"], fit["kind"]) for fit in plan] == [
        ("ppo_rtx4060", "whole"), ("a2c_rtx4060", "capped"), ("sac_rtx4060", "capped"), ("ppo_auto", "capped"),
    ]  # fmt: skip
    assert plan[0]["budget"] == 8_388_608
    assert all(fit["stop_after_s"] <= 40 for fit in plan[1:])
    command = device_twin_check.fit_command(plan[0], "/tmp/unused", "probe.json")
    assert "--model.init_args.rollout.frame_budget=8388608" in command
    assert tuple(command[-len(device_twin_check.ON_THE_DEVICE) :]) == device_twin_check.ON_THE_DEVICE  # they win
    assert '"stop_after_s": 150.0' in next(arg for arg in command if "FitProbe" in arg)
    # every child at its timeout (none expected: ~6 minutes in all) still ends within a 15-minute GPU loan
    total = device_twin_check.TWIN_TIMEOUT_S + sum(fit["timeout_s"] for fit in plan)
    assert total <= 15 * 60


def test_the_verdicts_compare_the_fastest_cuda_row_with_the_cpu_and_the_whole_fit_with_its_goal() -> None:
    twin = {
        "rows": [
            {"device": "cpu", "num_envs": 64, "frames_per_s": 10_000.0},
            {"device": "cpu", "num_envs": 256, "frames_per_s": 20_000.0},
            {"device": "cuda", "num_envs": 64, "frames_per_s": 5_000.0},
            {"device": "cuda", "num_envs": 4096, "frames_per_s": 400_000.0},
            {"device": "cuda", "num_envs": 16384, "frames_per_s": None, "status": "out of memory under the cap"},
        ]
    }
    fits = [{"kind": "whole", "frames_per_s": 160_000.0, "stopped_by_time_at_frames": None}]
    verdict = device_twin_check.judge(twin, fits)
    assert verdict["fastest_cuda"] == {"num_envs": 4096, "frames_per_s": 400_000.0}
    assert verdict["fastest_cuda_over_fastest_cpu"] == 20.0 and verdict["whole_ppo_goal_met"]
    stopped = device_twin_check.judge(twin, [{**fits[0], "stopped_by_time_at_frames": 100}])
    assert not stopped["whole_ppo_goal_met"]  # short of the budget: not the goal, however fast
