"""``gpu-check``: on a machine without CUDA it runs what applies and says why the rest was skipped; its verdicts
(peak under the estimate and the cap, the fastest cell that matches eager) are computed, not assumed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from benchmarks.gpu_check.report import markdown_report, profiles_section
from benchmarks.gpu_check.run import (
    CHECKS,
    CheckRun,
    fastest_matching,
    judge_profile,
    judge_update_rows,
    run_parallel,
    update_grid,
)
from iquitos_lightning.__main__ import main
from iquitos_lightning.profile.bases import profile_yaml
from iquitos_lightning.profile.hardware import GIB, MEMORY_CAP_ENV, memory_cap_bytes

REPO = Path(__file__).resolve().parents[2]


def run_gpu_check_quick(out: Path, *, in_process: bool = False) -> dict:
    """``python -m iquitos_lightning gpu-check --quick`` as a user types it; its JSON report. ``in_process``: run by
    ``main`` in this process (what the module entry runs, less ~10 s of imports; its checks are child processes of
    their own either way), for the CPU path; the CUDA path keeps a process of its own (this process is not CUDA's)."""
    if in_process:  # the device-twin section's CPU path has its own test (tests/benchmarks/test_device_twin_check.py)
        only = [check for check in CHECKS if check != "device-twin"]
        assert main(["gpu-check", "--quick", "--out", str(out), "--only", *only]) == 0
        return json.loads((out / "gpu_check.json").read_text())
    completed = subprocess.run(
        [sys.executable, "-m", "iquitos_lightning", "gpu-check", "--quick", "--out", str(out)],
        cwd=REPO,
        env={**os.environ, "WANDB_MODE": "disabled"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return json.loads((out / "gpu_check.json").read_text())


@pytest.mark.slow
@pytest.mark.cpu_only  # the CPU path (on a GPU machine with the GPU hidden); the test below runs the CUDA path
def test_gpu_check_on_a_cpu_times_the_update_step_and_reports_the_cuda_checks_as_skipped(tmp_path: Path) -> None:
    out = tmp_path / "gpu-check"
    report = run_gpu_check_quick(out, in_process=True)

    seen = report["device"]["views"]["as is"]
    assert seen["device"]["accelerator"] == "cpu"
    assert {choice["class"] for choice in seen["choices"].values()} == {"cpu"}
    assert list(report["device"]["views"]) == ["as is"]  # no cap view without CUDA
    for section in ("profiles", "oom_drill", "buffer"):
        assert "CUDA" in report[section]["skipped"]
    rows = report["update_step"]["rows"]
    assert [(row["algorithm"], row["precision"], row["switches"]) for row in rows] == [
        ("sac", "32-true", "eager"),
        ("ppo", "32-true", "eager"),
        ("a2c", "32-true", "eager"),
    ]
    assert all(row["losses_finite"] and row["updates_per_s"] > 0 and row["matches_eager"] for row in rows)
    assert set(report["update_step"]["fastest_matching"]) == {"sac", "ppo", "a2c"}
    table = (out / "gpu_check.md").read_text()
    assert table.count("Skipped:") == 5 and "| SAC | 32-true | eager |" in table  # 4 CUDA checks, device-twin left out


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (run with pytest -m gpu on a GPU)")
def test_gpu_check_quick_on_cuda_fits_a_profile_under_the_cap_and_passes_the_oom_drill(tmp_path: Path) -> None:
    report = run_gpu_check_quick(tmp_path)
    assert "capped to 8 GiB" in report["device"]["views"]
    (profile,) = report["profiles"]
    assert profile["under_estimate"] and profile["under_cap"] and profile["monitor_matches_torch"], profile
    assert all(drill["passed"] for drill in report["oom_drill"].values()), report["oom_drill"]


def test_memory_cap_is_read_in_gib_and_a_bad_value_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MEMORY_CAP_ENV, raising=False)
    assert memory_cap_bytes() is None
    monkeypatch.setenv(MEMORY_CAP_ENV, "8")
    assert memory_cap_bytes() == 8 * GIB
    monkeypatch.setenv(MEMORY_CAP_ENV, "eight")
    with pytest.raises(ValueError, match="in GiB"):
        memory_cap_bytes()
    monkeypatch.setenv(MEMORY_CAP_ENV, "-1")
    with pytest.raises(ValueError, match="positive"):
        memory_cap_bytes()


def _profile_row(peak_allocated: float, peak_reserved: float, estimate: float) -> dict:
    return {
        "name": "profile-sac_rtx4060",
        "config": "configs/sac_rtx4060.yaml",
        "algorithm": "sac",
        "precision": "16-mixed",
        "hidden_sizes": [256, 256],
        "batch": 256,
        "peak_allocated_gib": peak_allocated,
        "peak_reserved_gib": peak_reserved,
        "estimate_gib": estimate,
        "frames_per_s": 100.0,
        "updates_per_s": 90.0,
        "monitor_vs_torch": {
            "monitor_allocated_gb": 0.1,
            "torch_allocated_gb": 0.1,
            "monitor_reserved_gb": 0.2,
            "torch_reserved_gb": 0.25,
            "monitor_peak_gb": 0.3,
            "torch_peak_gb": 0.3,
        },
    }


def test_a_profile_whose_reserved_peak_passes_its_estimate_or_the_cap_is_flagged() -> None:
    within = judge_profile(_profile_row(0.4, 0.6, 0.7), cap_gib=8)
    assert within["under_estimate"] and within["under_cap"]
    over_estimate = judge_profile(_profile_row(0.4, 0.9, 0.7), cap_gib=8)  # reserved counts, not only allocated
    assert not over_estimate["under_estimate"] and over_estimate["under_cap"]
    over_cap = judge_profile(_profile_row(8.5, 8.6, 9.0), cap_gib=8)
    assert over_cap["under_estimate"] and not over_cap["under_cap"]
    assert not within["monitor_matches_torch"]  # reserved read 0.2 by the monitor, 0.25 by torch
    assert "**NO**" in profiles_section([over_estimate], cap_gib=8)


def _cell(switches: str, updates_per_s: float, loss: float, finite: bool = True) -> dict:
    return {
        "algorithm": "sac",
        "precision": "bf16-mixed",
        "switches": switches,
        "switches_run": switches,
        "updates_per_s": updates_per_s,
        "losses_finite": finite,
        "first_losses": {"loss_actor": loss, "loss_qvalue": 2 * loss},
    }


def test_the_fastest_cell_counts_only_if_its_losses_are_finite_and_match_eager() -> None:
    rows = judge_update_rows(
        [
            {
                "rows": [
                    _cell("eager", 100.0, 1.0),
                    _cell("compile", 400.0, 1.5),  # 50 % off eager's first losses: a different computation
                    _cell("cuda_graphs", 300.0, 1.0, finite=False),
                    _cell("compile+cuda_graphs", 250.0, 1.01),
                ]
            }
        ]
    )
    assert [row["matches_eager"] for row in rows] == [True, False, True, True]
    assert fastest_matching(rows)["sac"]["switches"] == "compile+cuda_graphs"


def test_the_markdown_report_has_a_section_per_check() -> None:
    report = {
        "versions": {"python": "3.11", "torch": "2.13.0"},
        "cap_gib": 8.0,
        "wall_s": 1.0,
        "device": {"views": {}},
        "profiles": [judge_profile(_profile_row(0.4, 0.6, 0.7), cap_gib=8)],
        "update_step": {"sizes": {"hidden_sizes": [256, 256], "batch_size": 256}, "rows": [], "not_run": []},
        "oom_drill": {"skipped": "no CUDA"},
        "buffer": {"skipped": "no CUDA"},
    }
    text = markdown_report(report)
    for title in ("## Device", "## Training profiles", "## Update step", "## Out-of-memory drill", "## Replay buffer"):
        assert title in text
    assert "| configs/sac_rtx4060.yaml | SAC 16-mixed |" in text


def test_past_the_deadline_a_check_is_reported_not_started_and_a_child_timeout_is_cut(tmp_path: Path) -> None:
    run = CheckRun(out=tmp_path, cap_gib=8.0, jobs=2, quick=True, cuda=False, deadline_s=100.0)
    assert run.timeout(420) <= 100  # cut to what is left
    run.started -= 90  # 10 s left: under the least time a check is started with
    results = run_parallel([("first", lambda: {"rows": []}), ("second", lambda: {"rows": []})], 2, run)
    assert all(result.get("skipped") and "deadline" in result["error"] for result in results.values())
    assert CheckRun(out=tmp_path, cap_gib=8.0, jobs=1, quick=True, cuda=False).timeout(420) == 420


def test_precisions_choose_the_update_cells_a_cuda_run_times(tmp_path: Path) -> None:
    run = CheckRun(out=tmp_path, cap_gib=8.0, jobs=1, quick=False, cuda=True, precisions=("16-mixed", "bf16-mixed"))
    groups = update_grid(run)
    assert [(algorithm, precision) for algorithm, precision, _ in groups][:3] == [
        ("sac", "16-mixed"), ("ppo", "16-mixed"), ("a2c", "16-mixed"),  # the card's precision first
    ]  # fmt: skip
    assert {precision for _, precision, _ in groups} == {"16-mixed", "bf16-mixed"}
    assert all("cuda_graphs" not in "".join(sets) for _, precision, sets in groups if precision == "16-mixed")
    assert any("cuda_graphs" in sets for _, precision, sets in groups if precision == "bf16-mixed")


def test_the_fit_probe_reads_torchs_counters_right_after_the_vram_monitor_wherever_it_was_added() -> None:
    import lightning.pytorch as pl

    from benchmarks.gpu_check.tasks import CountersBesideMonitor, FitProbe
    from iquitos_lightning.training.callbacks import LearningHealth, VRAMMonitor

    probe, monitor, health = FitProbe(report_path="unused.json"), VRAMMonitor(), LearningHealth()
    trainer = pl.Trainer(callbacks=[probe, monitor, health], logger=False, enable_checkpointing=False)
    probe.setup(trainer, None, "fit")
    probe.setup(trainer, None, "fit")  # a second fit of the same trainer adds nothing
    order = [type(callback) for callback in trainer.callbacks]
    assert order.index(CountersBesideMonitor) == order.index(VRAMMonitor) + 1
    assert order.count(CountersBesideMonitor) == 1 and probe.beside_monitor.monitor is monitor


def test_whole_fits_time_each_gpu_profile_its_alternative_and_its_cpu_profile_for_the_same_frames(
    tmp_path: Path,
) -> None:
    from benchmarks.gpu_check.report import whole_fits_section
    from benchmarks.gpu_check.tasks import profile_fit_command
    from benchmarks.gpu_check.whole_fits import against_cpu, rollouts_for, whole_fit_plan

    configs = ["configs/a2c_rtx4060.yaml", "configs/ppo_rtx4060.yaml", "configs/sac_rtx4060.yaml"]
    plan = whole_fit_plan(configs)
    sac = [fit for fit in plan if fit["profile"] == "sac_rtx4060"]
    assert [fit["variant"] for fit in sac] == ["as committed", "16-mixed eager", "CPU profile"]
    assert sac[2]["config"] == "configs/sac_cpu.yaml" and sac[2]["cpu"]  # what a user without the GPU runs
    ppo = [fit for fit in plan if fit["profile"] == "ppo_rtx4060"]
    assert [fit["variant"] for fit in ppo] == ["as committed", "16-mixed eager", "CPU profile"]  # what it replaced
    assert len({fit["name"] for fit in plan}) == len(plan) == 8  # A2C: only as committed and its CPU profile
    # 10,240 timed frames at least, 3 timed rollouts at least, plus the first
    assert [rollouts_for(config) for config in configs] == [4, 4, 41]
    overrides = sac[1]["overrides"]
    command = profile_fit_command(sac[1]["config"], 2, str(tmp_path), "probe.json", overrides)
    assert tuple(command[-len(overrides) :]) == overrides  # last: they win over the profile and the probe's budget

    measured = {sac[0]["name"]: {"frames_per_s": 2000.0}, sac[2]["name"]: {"frames_per_s": 800.0}}
    rows = [row for row in against_cpu(plan, measured) if row["profile"] == "sac_rtx4060"]
    assert [row["x_cpu"] for row in rows] == [2.5, None, 1.0]
    assert rows[1]["error"] == "not run"
    text = whole_fits_section(rows)
    assert "| sac_rtx4060 | as committed | - | 2,000 | - | 2.50x |" in text and "failed: not run" in text


def test_the_fits_check_runs_its_fits_through_the_cli_and_reports_each_row(tmp_path: Path) -> None:
    """The orchestration a GPU loan depends on, run here on the tiny site's twin: a GPU profile (refused without
    CUDA, reported as such) and its CPU profile (timed, the ratio's base), each through ``fit``."""
    from benchmarks.gpu_check.run import gpu_profile_fits

    smoke = profile_yaml(REPO / "configs" / "smoke.yaml")
    smoke["model"]["init_args"]["env"] |= {
        "backend": {"train": "twin", "num_envs": 16, "data_root": str(REPO / "data")}
    }
    smoke["model"]["init_args"]["rollout"]["frames_per_batch"] = 4096  # 4 rollouts: the first, then 3 timed
    smoke["model"]["init_args"] |= {"updates_per_frame": 0.005, "init_random_frames": 4096}
    smoke["report"] = {"plots": False}  # the check reads frames/s, not the run's images
    (tmp_path / "tiny_cpu.yaml").write_text(yaml.safe_dump(smoke))
    smoke["trainer"]["precision"] = "16-mixed"
    gpu_profile = tmp_path / "tiny_rtx4060.yaml"
    gpu_profile.write_text(yaml.safe_dump(smoke))

    run = CheckRun(out=tmp_path / "out", cap_gib=8.0, jobs=1, quick=True, cuda=torch.cuda.is_available())
    rows = gpu_profile_fits(run, [str(gpu_profile)])
    assert [(row["profile"], row["variant"]) for row in rows] == [
        ("tiny_rtx4060", "as committed"), ("tiny_rtx4060", "CPU profile"),
    ]  # fmt: skip
    cpu_row = rows[1]
    assert cpu_row["frames_per_s"] > 0 and cpu_row["x_cpu"] == 1.0 and cpu_row["rollouts"] == 4
    if not torch.cuda.is_available():
        assert "no CUDA device" in rows[0]["error"] and rows[0]["x_cpu"] is None
