"""Checkpoint files survive SIGKILL mid-write, and unwritable targets fail clearly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from iquitos_lightning.training.checkpoint_io import (
    TEMP_SUFFIX,
    CheckpointReadError,
    CheckpointWriteError,
    SafeCheckpointIO,
    remove_stale_partials,
)

# A child that writes ~64 MB checkpoints in a loop, announcing each write before it starts.
WRITER = """
import sys, torch
from iquitos_lightning.training.checkpoint_io import SafeCheckpointIO
io_plugin = SafeCheckpointIO()
path = sys.argv[1]
for generation in range(1000):
    print(f"writing {generation}", flush=True)
    io_plugin.save_checkpoint({"generation": generation, "payload": torch.full((16_000_000,), float(generation))}, path)
    print(f"done {generation}", flush=True)
"""


def test_sigkill_during_write_keeps_last_complete_checkpoint(tmp_path: Path) -> None:
    target = tmp_path / "last.ckpt"
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True, bufsize=1)
    completed = -1
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("done"):
            completed = int(line.split()[1])
        if line.startswith("writing") and completed >= 1:
            # Kill while generation completed+1 is on its way to disk: once its bytes have started to land
            # (a partial file, or the target itself if the writer were not atomic, has grown past 1 MB).
            _wait_for_bytes_of_a_new_write(tmp_path, target, time.monotonic() + 10)
            os.kill(child.pid, signal.SIGKILL)
            break
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL

    checkpoint = SafeCheckpointIO().load_checkpoint(target)
    assert checkpoint["generation"] == completed  # the write in progress never replaced the complete one
    assert torch.all(checkpoint["payload"] == float(checkpoint["generation"]))
    removed = remove_stale_partials(tmp_path)
    assert removed and all(path.name.endswith(TEMP_SUFFIX) for path in removed)  # the killed write's leftover
    assert not list(tmp_path.glob(f"*{TEMP_SUFFIX}"))


def _wait_for_bytes_of_a_new_write(folder: Path, target: Path, deadline: float) -> None:
    """Return once a partial file holds over 1 MB, or the target was rewritten below its full size."""
    full_size = target.stat().st_size
    while time.monotonic() < deadline:
        partials = [path for path in folder.glob(f"*{TEMP_SUFFIX}") if path.stat().st_size > 2**20]
        if partials or 2**20 < target.stat().st_size < full_size:
            return
        time.sleep(0.002)
    raise AssertionError("the writer never started a new checkpoint on disk")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_folder_fails_clearly_and_keeps_previous(tmp_path: Path) -> None:
    _check_read_only(tmp_path)


def test_read_only_folder_as_root_uses_a_full_target(tmp_path: Path) -> None:
    """Root ignores permissions, so a target that is a directory stands in for 'cannot write'."""
    target = tmp_path / "last.ckpt"
    SafeCheckpointIO().save_checkpoint({"generation": 0}, target)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where a folder is needed")
    with pytest.raises(CheckpointWriteError, match="cannot write checkpoint"):
        SafeCheckpointIO().save_checkpoint({"generation": 1}, blocked / "last.ckpt")
    assert SafeCheckpointIO().load_checkpoint(target)["generation"] == 0


def _check_read_only(tmp_path: Path) -> None:
    target = tmp_path / "last.ckpt"
    SafeCheckpointIO().save_checkpoint({"generation": 0}, target)
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(CheckpointWriteError, match="permission denied.*previous checkpoint there is intact"):
            SafeCheckpointIO().save_checkpoint({"generation": 1}, target)
    finally:
        tmp_path.chmod(0o700)
    assert SafeCheckpointIO().load_checkpoint(target)["generation"] == 0


def test_full_disk_fails_clearly_and_keeps_previous(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/dev/full answers every write with ENOSPC: the error must say the disk is full."""
    if not Path("/dev/full").exists():
        pytest.skip("/dev/full is not available")
    from iquitos_lightning import atomic_files

    target = tmp_path / "last.ckpt"
    SafeCheckpointIO().save_checkpoint({"generation": 0}, target)
    real_open = open

    def open_full_disk(file, mode="r", *args, **kwargs):  # noqa: ANN001 - mirrors builtins.open
        if str(file).endswith(TEMP_SUFFIX) and "w" in mode:
            return real_open("/dev/full", mode, *args, **kwargs)
        return real_open(file, mode, *args, **kwargs)

    # The temp file is opened on /dev/full, a real device whose writes fail with ENOSPC.
    monkeypatch.setattr(atomic_files, "open", open_full_disk, raising=False)
    with pytest.raises(CheckpointWriteError, match="disk is full"):
        SafeCheckpointIO().save_checkpoint({"generation": 1, "payload": torch.zeros(1000)}, target)
    monkeypatch.undo()
    assert SafeCheckpointIO().load_checkpoint(target)["generation"] == 0


def test_truncated_checkpoint_is_reported_not_a_deep_trace(tmp_path: Path) -> None:
    target = tmp_path / "broken.ckpt"
    SafeCheckpointIO().save_checkpoint({"payload": torch.zeros(10_000)}, target)
    target.write_bytes(target.read_bytes()[:100])
    with pytest.raises(CheckpointReadError, match="cannot be loaded"):
        SafeCheckpointIO().load_checkpoint(target)


def test_removing_a_checkpoint_that_is_already_gone_is_not_an_error(tmp_path: Path) -> None:
    """Lightning removes superseded checkpoints; one deleted meanwhile (by hand, by a cleanup) must not stop a run."""
    io = SafeCheckpointIO()
    kept = tmp_path / "frames=100.ckpt"
    kept.write_bytes(b"x")
    io.remove_checkpoint(kept)
    assert not kept.exists()
    io.remove_checkpoint(kept)  # a second time: already gone, no error
