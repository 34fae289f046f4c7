"""A full or read-only output folder (a real tmpfs) fails with one clear line and keeps the previous checkpoint."""

from __future__ import annotations

import re
import subprocess

import pytest
from robust_testkit import REPO, load, pendulum_sac_args, tmpfs

from iquitos_lightning.__main__ import main
from iquitos_lightning.cli import run_lightning_cli


@pytest.mark.parametrize(
    ("mode", "said"),
    [("full", "the disk is full"), ("readonly", "the file system is read-only")],
)
def test_checkpoint_folder_full_or_read_only_fails_clearly_and_keeps_the_previous_one(tmp_path, capsys, mode, said):
    with tmpfs(tmp_path / "checkpoints", size_kib=4096) as checkpoints:
        breaker = "robust_testkit.BreakDiskAfterFirstCheckpoint"
        code = run_lightning_cli(
            [
                *pendulum_sac_args(tmp_path, frame_budget=1_000, every_n_frames=50),
                f"--trainer.callbacks+={breaker}",
                f"--trainer.callbacks.mountpoint={checkpoints}",
                f"--trainer.callbacks.mode={mode}",
            ]
        )
        err = capsys.readouterr().err
        assert code == 5, err
        assert re.search(rf"error: cannot write checkpoint {re.escape(str(checkpoints))}/.*{said}", err)
        assert "previous checkpoint there is intact" in err or "no previous checkpoint" in err
        assert "Traceback" not in err
        assert load(checkpoints / "last.ckpt")["rl_state"]["frames_done"] == 50  # the one saved before the disk broke


def test_report_to_a_read_only_folder_fails_clearly(tmp_path, capsys):
    with tmpfs(tmp_path / "results", size_kib=1024) as results:
        subprocess.run(["mount", "-o", "remount,ro", str(results)], check=True)
        code = main(["baselines", "--site", str(REPO / "configs" / "site" / "tiny.yaml"), "--results", str(results)])
    err = capsys.readouterr().err
    assert code == 5, err
    assert re.search(r"error: cannot (write|create) (the )?report .*the file system is read-only", err)


def test_a_read_only_checkpoint_folder_is_refused_before_any_training(tmp_path, capsys):
    with tmpfs(tmp_path / "checkpoints", size_kib=1024) as checkpoints:
        subprocess.run(["mount", "-o", "remount,ro", str(checkpoints)], check=True)
        code = run_lightning_cli(pendulum_sac_args(tmp_path, frame_budget=2_000, every_n_frames=2_000))
        err = capsys.readouterr().err
    assert code == 5, err
    assert re.search(rf"error: cannot (write|create) (the )?checkpoint {re.escape(str(checkpoints))}.*read-only", err)
    logged = "".join(path.read_text() for path in (tmp_path / "run").rglob("metrics.csv"))
    assert "progress/frames_done" not in logged  # refused at start: not one rollout was trained
