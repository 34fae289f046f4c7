"""SIGTERM to the whole process group, as ``timeout``, ``kill -- -PGID`` and schedulers send it, during ``fit``.

The run must end as docs/robustness.md promises: after the current rollout, with a checkpoint, one line saying where
it is and exit status 143; collection workers (which get the signal too) must neither die on it nor outlive
the run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from robust_testkit import REPO, child_env, load

FRAMES_PER_BATCH = 56  # configs/smoke.yaml: the tiny site, rollouts of 56 frames, a checkpoint every 168
START_TIMEOUT_S = 240


def _group_members(pgid: int) -> list[str]:
    """The live (non-zombie) processes of a process group, as ``pid state`` strings (Linux /proc)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended while listed
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(f"{stat.parent.name} {fields[0]}")
    return members


@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "two-workers"])
def test_sigterm_to_the_process_group_saves_says_where_and_exits_143(tmp_path: Path, workers: int) -> None:
    checkpoints = tmp_path / "checkpoints"
    command = [sys.executable, "-m", "iquitos_lightning", "fit", "--config", "configs/smoke.yaml",
               f"--trainer.logger.init_args.save_dir={tmp_path}", f"--checkpoint.dirpath={checkpoints}",
               "--model.init_args.rollout.frame_budget=1000000", "--model.init_args.rollout.eval_episodes=0",
               f"--model.init_args.env.backend.num_workers={workers}", "--tracking.wandb=false"]  # fmt: skip
    stderr_path = tmp_path / "stderr.txt"
    with stderr_path.open("w") as stderr, open(os.devnull, "w") as stdout:
        # A session of its own: the child leads a new process group, which the signal below goes to.
        child = subprocess.Popen(
            command, cwd=REPO, env=child_env(), stdout=stdout, stderr=stderr, start_new_session=True
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (checkpoints / "last.ckpt").exists():
            assert child.poll() is None, f"the run ended early ({child.returncode}):\n{stderr_path.read_text()}"
            assert time.monotonic() < deadline, "the run never wrote its first checkpoint"
            time.sleep(0.1)
        os.killpg(child.pid, signal.SIGTERM)  # the whole group, workers included, as `timeout` does
        child.wait(timeout=90)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()

    said = stderr_path.read_text()
    assert child.returncode == 143, said
    assert "Traceback" not in said and "Received SIGTERM" not in said, said
    last = checkpoints / "last.ckpt"
    resume = "resume with the same command and --ckpt_path last"
    saved = f"terminated (SIGTERM): checkpoint saved to {last}; {resume}"
    # the signal may land before the run has collected anything since the checkpoint this test waited for (seen once
    # in a full suite run on the 2-core machine): then there is nothing newer to save, and the line says so
    up_to_date = f"terminated (SIGTERM): the last checkpoint, {last}, was already up to date; {resume}"
    assert said.strip().splitlines()[-1] in (saved, up_to_date), said
    assert sum(line.startswith("terminated") for line in said.splitlines()) == 1
    frames = load(last)["rl_state"]["frames_done"]
    assert frames > 0 and frames % FRAMES_PER_BATCH == 0  # saved at a rollout boundary
    deadline = time.monotonic() + 30
    while (left := _group_members(child.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"processes of the run outlived it: {left}"
