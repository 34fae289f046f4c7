"""Crash and interrupt, in real processes: Ctrl-C saves and exits 130; kill -9 mid-write keeps the last checkpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import lightning.pytorch as pl
import pytest
from robust_testkit import REPO, child_env, load, pendulum_sac_args

sys.path.insert(0, str(REPO / "tests" / "agents"))
from agents_testkit import cpu_trainer, small_sac  # noqa: E402

from iquitos_lightning.atomic_files import TEMP_SUFFIX  # noqa: E402
from iquitos_lightning.cli import raised_while_interrupting, run_lightning_cli  # noqa: E402
from iquitos_lightning.training.callbacks.frame_checkpoint import FrameCheckpoint  # noqa: E402
from iquitos_lightning.training.checkpoint_io import SafeCheckpointIO  # noqa: E402

START_TIMEOUT_S = 180


def _start(args: list[str]) -> subprocess.Popen:
    command = [sys.executable, "-m", "iquitos_lightning", *args]
    return subprocess.Popen(
        command, cwd=REPO, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for(condition, child: subprocess.Popen, poll_s: float) -> None:  # noqa: ANN001 - a zero-argument predicate
    deadline = time.monotonic() + START_TIMEOUT_S
    while not condition():
        if child.poll() is not None:
            raise AssertionError(f"the run ended early ({child.returncode}):\n{child.stderr.read()}")
        if time.monotonic() > deadline:
            child.kill()
            raise AssertionError("the run never reached the expected point")
        time.sleep(poll_s)


def _interrupted_run(
    tmp_path: Path, updates_per_frame: float, ctrl_c_count: int, wandb: bool = False, extra: tuple[str, ...] = ()
) -> tuple[str, dict]:
    """A Pendulum SAC ``fit`` sent ``ctrl_c_count`` SIGINTs 0.5 s apart once its first checkpoint exists; asserts
    exit 130, the one line and no traceback; returns stderr and the saved ``rl_state``."""
    checkpoints = tmp_path / "checkpoints"
    arguments = pendulum_sac_args(
        tmp_path, frame_budget=1_000_000, every_n_frames=50, updates_per_frame=updates_per_frame, wandb=wandb
    )
    arguments += list(extra)
    child = _start(arguments)
    _wait_for(lambda: (checkpoints / "last.ckpt").exists(), child, poll_s=0.05)
    for count in range(ctrl_c_count):
        time.sleep(0.5 * (count > 0))
        child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == 130, stderr
    assert "interrupted" in stderr and "--ckpt_path last" in stderr
    assert "Traceback" not in stderr
    return stderr, load(checkpoints / "last.ckpt")["rl_state"]


def test_ctrl_c_stops_after_the_rollout_saves_a_consistent_checkpoint_and_exits_130(tmp_path: Path) -> None:
    """The run as a user starts it, with its offline W&B run (the other interrupts here run without W&B)."""
    stderr, state = _interrupted_run(tmp_path, updates_per_frame=0.2, ctrl_c_count=1, wandb=True)
    assert "interrupted: checkpoint saved to" in stderr
    assert list((tmp_path / "run" / "wandb").iterdir())  # W&B's offline run was there when Ctrl-C came
    # Saved at a rollout boundary with every update of that rollout made: 0.2 updates per frame from the
    # first rollout on, so the counters agree exactly (an interrupt mid-update would break this).
    assert state["frames_done"] % 50 == 0 and state["frames_done"] >= 50
    assert state["updates_done"] == state["frames_done"] // 5
    assert len(state["agent"]["replay_buffer"]["data"]["observation"]) == state["frames_done"]


def test_a_second_ctrl_c_stops_inside_the_updates_still_saving_and_exits_130(tmp_path: Path) -> None:
    """The first Ctrl-C waits for the rollout's updates; a second one stops at once (mid-updates), still saving."""
    # 40 updates per frame: each 50-frame rollout is 2,000 updates (~18 s of CPU on the 2-core machine on 2026-11-29,
    # over 1 s on any machine this runs on), so the second Ctrl-C, 0.5 s after the first, lands inside them. The
    # first rollout is random and makes none (random frames until 100), so the checkpoint the Ctrl-Cs wait for is
    # written at once rather than after 2,000 updates nothing reads.
    _, state = _interrupted_run(
        tmp_path, updates_per_frame=40.0, ctrl_c_count=2, extra=("--model.init_random_frames=100",)
    )
    # Stopped inside a rollout's updates: fewer than 40 per frame past the first rollout's 50 (a first Ctrl-C alone
    # makes them all).
    assert state["frames_done"] >= 100
    assert state["updates_done"] < 40 * (state["frames_done"] - 50)


def test_kill_9_in_the_middle_of_a_checkpoint_write_keeps_last_loadable_and_fit_resumes(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    # 1024-wide networks make each checkpoint ~45 MB, so a write lasts long enough to be caught in the act.
    big = {"every_n_frames": 50, "hidden": 1024, "updates_per_frame": 0.04}
    child = _start(pendulum_sac_args(tmp_path, frame_budget=1_000_000, **big))

    def writing_a_checkpoint() -> bool:
        partial = [path for path in checkpoints.glob(f"*.ckpt.*{TEMP_SUFFIX}") if ".link" not in path.name]
        return bool(partial) and (checkpoints / "last.ckpt").exists()

    _wait_for(writing_a_checkpoint, child, poll_s=0.001)
    child.kill()
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert list(checkpoints.glob(f"*{TEMP_SUFFIX}")), "the kill should have interrupted a write"

    last = checkpoints / "last.ckpt"
    frames_at_kill = SafeCheckpointIO().load_checkpoint(last)["rl_state"]["frames_done"]
    assert frames_at_kill >= 50

    # the resume in this process (``run_lightning_cli``, what the command runs; the kill above needed a real one)
    arguments = [*pendulum_sac_args(tmp_path, frame_budget=frames_at_kill + 100, **big), "--ckpt_path=last"]
    assert run_lightning_cli(arguments) == 0
    assert not list(checkpoints.glob(f"*{TEMP_SUFFIX}"))  # the killed write's leftover was cleaned up
    assert load(last)["rl_state"]["frames_done"] == frames_at_kill + 100


class SimulatedKill(BaseException):
    """Stands in for SIGKILL at one exact instruction: nothing after it runs, no cleanup catches it."""


class KillAtSecondLink(pl.Callback):
    """Makes the next ``last`` link update die (at ``os.symlink``) once the first checkpoint is on disk."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, checkpoints: Path) -> None:
        self.monkeypatch, self.checkpoints = monkeypatch, checkpoints

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:  # noqa: ANN001
        if (self.checkpoints / "last.ckpt").exists():

            def die(*args: object, **kwargs: object) -> None:
                raise SimulatedKill

            self.monkeypatch.setattr(os, "symlink", die)


def test_a_kill_while_last_is_relinked_leaves_last_pointing_at_a_complete_checkpoint(tmp_path, monkeypatch):
    """Lightning removes the old top-k file and then the old link before linking anew: a kill in between
    leaves no ``last``. Here the link is swapped by one rename and replaced files go only afterwards."""
    checkpoints = tmp_path / "checkpoints"
    pl.seed_everything(0)
    callbacks = [
        KillAtSecondLink(monkeypatch, checkpoints),
        FrameCheckpoint(every_n_frames=50, dirpath=str(checkpoints)),
    ]
    with pytest.raises(SimulatedKill):
        cpu_trainer(tmp_path, callbacks=callbacks, plugins=[SafeCheckpointIO()]).fit(small_sac(500))
    monkeypatch.undo()

    last = checkpoints / "last.ckpt"
    assert last.exists(), f"'last' must resolve to a file, found {sorted(p.name for p in checkpoints.iterdir())}"
    assert SafeCheckpointIO().load_checkpoint(last)["rl_state"]["frames_done"] == 50

    resumed = small_sac(150)
    cpu_trainer(tmp_path, callbacks=[FrameCheckpoint(every_n_frames=50, dirpath=str(checkpoints))]).fit(
        resumed, ckpt_path="last"
    )
    assert resumed.frames_done == 150


def test_an_error_raised_while_a_ctrl_c_unwinds_counts_as_the_interrupt() -> None:
    """A library's cleanup failing under a second Ctrl-C (seen: TorchRL's vmap parameter swap) is an interrupt."""

    def cleanup_fails_during_interrupt() -> None:
        try:
            raise KeyboardInterrupt
        finally:
            raise RuntimeError("Converting a tensordict to boolean value is not permitted")

    with pytest.raises(RuntimeError) as raised:
        cleanup_fails_during_interrupt()
    assert raised_while_interrupting(raised.value)
    assert not raised_while_interrupting(RuntimeError("a real bug"))
    try:
        raise ValueError("first")
    except ValueError as first:
        try:
            raise RuntimeError("second") from first
        except RuntimeError as second:
            assert not raised_while_interrupting(second)  # a chain without an interrupt
