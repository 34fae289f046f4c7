"""scripts/install.sh refuses a disk too full for a new .venv in one line, before pip fails deep in its output
(CI once died of "[Errno 28] No space left on device" after 35 s of pip warnings)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("python3.11") is None, reason="install.sh looks for python3.11 first")
def test_a_disk_without_room_for_the_venv_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "install.sh", tmp_path / "scripts" / "install.sh")
    environment = {**os.environ, "INSTALL_NEEDS_MB": str(10**12)}  # more than any disk has
    result = subprocess.run(
        ["bash", "scripts/install.sh"], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "MB free on" in result.stderr and "free some disk" in result.stderr
    assert not (tmp_path / ".venv").exists()  # refused before anything was written
