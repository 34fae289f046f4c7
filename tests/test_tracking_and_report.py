"""What a run leaves behind: an offline W&B run holding the logged keys, the CSV log, and the report folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from iquitos_lightning.cli import run_lightning_cli
from iquitos_lightning.training.tracking import resolve_wandb_mode

REPO = Path(__file__).resolve().parents[1]
SMOKE = str(REPO / "configs" / "smoke.yaml")


def _smoke(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "--config",
        SMOKE,
        "--trainer.logger.init_args.save_dir",
        str(tmp_path),
        "--checkpoint.dirpath",
        str(tmp_path / "smoke" / "checkpoints"),
        *extra,
    ]


def _assert_png(path: Path) -> None:
    assert path.stat().st_size > 10_000, path
    with Image.open(path) as image:
        assert image.width > 400 and image.height > 300


def test_wandb_mode_defaults_to_offline_and_refuses_unknown_modes(monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert resolve_wandb_mode() == "offline"
    monkeypatch.setenv("WANDB_MODE", "dryrun")  # what wandb itself sets once an offline run has started
    assert resolve_wandb_mode() == "offline"
    monkeypatch.setenv("WANDB_MODE", "sometimes")
    with pytest.raises(ValueError, match="sometimes"):
        resolve_wandb_mode()


def test_smoke_run_leaves_offline_wandb_run_csv_log_and_report(tmp_path):
    # A real process, as a user runs it: W&B's offline records are complete once the process has exited.
    # CUDA hidden, so the CPU memory keys are checked on a GPU runner too (instead of skipping there).
    environment = {**os.environ, "WANDB_MODE": "offline", "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, "-m", "iquitos_lightning", "fit", *_smoke(tmp_path)]
    result = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    root = tmp_path / "smoke"

    runs = list((root / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, "one offline W&B run, to be synced later with `wandb sync`"
    records = next(runs[0].glob("run-*.wandb")).read_bytes()
    keys = (b"train/loss_qvalue", b"health/q_mean", b"speed/frames_per_s", b"memory/rss_gb", b"val/kpi/co2_kg")
    for key in (*keys, b"frame_budget"):
        assert key in records, key
    assert list(runs[0].glob("files/media/table/val/kpi_table*.json")), "the evaluation's KPI table"
    plots = sorted(path.name.rsplit("_", 2)[0] for path in runs[0].glob("files/media/images/report/fit/*.png"))
    assert plots == ["daily_profile", "dispatch_week", "health", "learning_curve"], plots

    header = (root / "version_0" / "metrics.csv").read_text().splitlines()[0]
    for key in ("speed/frames_per_s", "progress/frames_done", "memory/rss_gb", "val/kpi/co2_kg", "train/loss_actor"):
        assert key in header, key

    report = root / "report"
    _assert_png(report / "learning_curve.png")
    _assert_png(report / "dispatch_week.png")
    _assert_png(report / "daily_profile.png")
    row = json.loads((report / "kpis.json").read_text())
    assert row["stage"] == "fit" and row["frames_done"] == 336 and row["co2_kg"] > 0
    assert "| SAC |" in (report / "kpis.md").read_text()
    summary = (report / "summary.md").read_text()
    assert "336 of a budget of 336" in summary and "![learning_curve](learning_curve.png)" in summary


def test_test_stage_rewrites_the_report_and_resume_keeps_the_learning_curve(tmp_path):
    checkpoints = tmp_path / "smoke" / "checkpoints"
    half = ["--model.init_args.rollout.frame_budget", "168", "--model.init_args.rollout.eval_every_frames", "168"]
    assert run_lightning_cli(["fit", *_smoke(tmp_path, *half, "--report.plots=false")]) == 0
    report = tmp_path / "smoke" / "report"
    assert {"kpis.json", "evaluations.csv", "summary.md"} <= {path.name for path in report.iterdir()}
    assert not list(report.glob("*.png"))  # the tables without the images
    resumed = ["--model.init_args.rollout.eval_every_frames", "168", "--ckpt_path", str(checkpoints / "last.ckpt")]
    assert run_lightning_cli(["fit", *_smoke(tmp_path, *resumed)]) == 0
    _assert_png(report / "learning_curve.png")  # images by default

    state = torch.load(checkpoints / "last.ckpt", weights_only=False)["callbacks"]
    report_state = next(value for key, value in state.items() if key.startswith("RunReport"))
    assert [evaluation["frames"] for evaluation in report_state["evaluations"]] == [168.0, 336.0]
    assert [frames for frames, _ in report_state["train_returns"]] == [168, 336]

    assert run_lightning_cli(["test", *_smoke(tmp_path, "--ckpt_path", str(checkpoints / "last.ckpt"))]) == 0
    row = json.loads((tmp_path / "smoke" / "report" / "kpis.json").read_text())
    assert row["stage"] == "test" and row["frames_done"] == 336 and row["ev_departures"] > 0
