"""Shared pieces of the robustness tests: a small SAC-on-Pendulum command line, a real tmpfs, fault injectors."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def pendulum_sac_args(
    root: Path,
    *,
    frame_budget: int,
    every_n_frames: int = 100,
    hidden: int = 32,
    updates_per_frame: float = 1.0,
    wandb: bool = False,
) -> list[str]:
    """``fit`` arguments of a SAC run on Pendulum (50-step episodes, rollouts of 50 frames) writing under ``root``.

    ``wandb``: the W&B run a user gets by default (offline in a child: :func:`child_env`), ~5 s of CPU per process
    for W&B's own service; off unless the test is about a run as the user starts it."""
    return [
        "fit",
        "--model=SAC",
        "--model.env.name=Pendulum-v1",
        "--model.env.episodes.max_steps=50",
        f"--model.rollout.frame_budget={frame_budget}",
        "--model.rollout.frames_per_batch=50",
        f"--model.rollout.eval_every_frames={50 * 1000}",
        "--model.rollout.eval_episodes=0",
        "--model.buffer.capacity=20000",
        f"--model.hidden_sizes=[{hidden}, {hidden}]",
        "--model.batch_size=32",
        "--model.init_random_frames=50",
        f"--model.updates_per_frame={updates_per_frame}",
        f"--checkpoint.every_n_frames={every_n_frames}",
        f"--checkpoint.dirpath={root / 'checkpoints'}",
        f"--trainer.logger.init_args.save_dir={root}",
        "--trainer.logger.init_args.name=run",
        "--trainer.accelerator=cpu",
        "--trainer.enable_progress_bar=false",
        "--trainer.enable_model_summary=false",
        "--report.plots=false",  # the runs' images are not what these tests check
        f"--tracking.wandb={str(wandb).lower()}",
    ]


def child_env() -> dict[str, str]:
    """The environment of a ``python -m iquitos_lightning`` child: this checkout first, W&B offline."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["WANDB_MODE"] = "offline"
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")  # tiny networks: a second thread only contends with the test runner
    return env


def load(path: Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=False)


@contextlib.contextmanager
def tmpfs(path: Path, size_kib: int) -> Iterator[Path]:
    """A real, small tmpfs at ``path`` (needs root, as in the CI container); skips where mounting is refused."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


class BreakDiskAfterFirstCheckpoint(pl.Callback):
    """Once the first checkpoint is on disk, fills the checkpoint tmpfs ("full") or remounts it read-only."""

    def __init__(self, mountpoint: str, mode: str = "full") -> None:
        self.mountpoint = Path(mountpoint)
        self.mode = mode
        self.done = False

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.done or not any(self.mountpoint.glob("*.ckpt")):
            return
        self.done = True
        if self.mode == "readonly":
            subprocess.run(["mount", "-o", "remount,ro", str(self.mountpoint)], check=True)
            return
        with contextlib.suppress(OSError), open(self.mountpoint / "filler", "wb") as filler:
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
