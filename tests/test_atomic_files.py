"""Atomic writes: missing folders are created, and a failed write says what happened and what is left.

The cases the mutation run of ``atomic_files.py`` found unpinned (docs/testing.md), on real files: a path whose
folders do not exist yet, a folder that is in fact a file, and a target that is in fact a folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iquitos_lightning.atomic_files import CheckpointWriteError, ensure_writable_folder, write_atomically


def test_missing_folders_are_created_at_any_depth(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "c.ckpt"
    write_atomically(b"data", target)
    assert target.read_bytes() == b"data"
    folder = ensure_writable_folder(tmp_path / "x" / "y" / "z")
    assert folder.is_dir() and list(folder.iterdir()) == []  # the write probe is gone


def test_a_failed_write_names_the_cause_the_advice_and_whether_a_previous_file_is_left(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_bytes(b"a file where a folder should be")
    target = blocker / "c.ckpt"
    with pytest.raises(CheckpointWriteError) as no_folder:
        write_atomically(b"data", target)
    assert str(no_folder.value) == (
        f"cannot write checkpoint {target}: File exists; check that the folder exists and is writable "
        "(no previous checkpoint was there)"
    )
    occupied = tmp_path / "last.ckpt"
    (occupied / "inside").mkdir(parents=True)  # the target is a non-empty folder: the rename cannot replace it
    with pytest.raises(CheckpointWriteError, match=r"\(the previous report there is intact\)$"):
        write_atomically(b"data", occupied, what="report")
    assert (occupied / "inside").is_dir() and list(tmp_path.glob("*.partial")) == []
