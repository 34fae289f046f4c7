"""The offline bundle: ``scripts/wheelhouse.sh`` collects exactly the pinned wheels a target lacks (never torch), and
``scripts/install-offline.sh`` installs them with the network blocked over the target's own (here CPU) torch.

The target stands in as this venv with a few small packages declared missing: the bundle must then hold those
and what only they need, and their imports must come from the install folder. Downloading needs the package
index (CI reaches it); installing must not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MISSING_ON_TARGET = {"gymnasium", "farama-notifications", "jax-jumpy", "jsonargparse", "docstring-parser",
                     "typeshed-client"}  # fmt: skip

pytestmark = pytest.mark.slow


def _network_blocked() -> list[str]:
    """``unshare -n`` (a new network namespace with no interfaces up) where this machine allows it."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0:
        return [unshare, "-n"]
    return []


def test_bundle_holds_what_the_target_lacks_and_installs_without_network(tmp_path: Path) -> None:
    freeze = subprocess.run(
        [sys.executable, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    have = [line for line in freeze if line.split("==")[0].lower().replace("_", "-") not in MISSING_ON_TARGET]
    (tmp_path / "have.txt").write_text("\n".join(have) + "\n")
    wheelhouse = tmp_path / "wheelhouse"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    built = subprocess.run(
        [
            "bash",
            "scripts/wheelhouse.sh",
            "--python",
            python,
            "--out",
            str(wheelhouse),
            "--have",
            str(tmp_path / "have.txt"),
            "--keep",
            "",
            "--without",
            "pvlib,wandb",
            "--max-mib",
            "10",
        ],  # fmt: skip
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    bundled = {
        line.split("-")[0].lower().replace("_", "-") for line in (wheelhouse / "requirements.txt").read_text().split()
    }
    assert bundled == MISSING_ON_TARGET | {"iquitos-lightning"}  # and the project's own wheel
    assert "torch" not in (wheelhouse / "MANIFEST.txt").read_text()

    target = tmp_path / "site"
    installed = subprocess.run(
        [*_network_blocked(), "bash", "scripts/install-offline.sh", str(wheelhouse), str(target)],
        cwd=REPO,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-2000:]
    assert "install-offline.sh: ready: torch" in installed.stdout
    where = subprocess.run(
        [sys.executable, "-c", "import gymnasium, jsonargparse; print(gymnasium.__file__, jsonargparse.__file__)"],
        env={**os.environ, "PYTHONPATH": str(target)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(Path(path).is_relative_to(target) for path in where)


def test_install_offline_refuses_a_folder_that_is_no_bundle(tmp_path: Path) -> None:
    completed = subprocess.run(
        ["bash", "scripts/install-offline.sh", str(tmp_path)], cwd=REPO, capture_output=True, text=True
    )
    assert completed.returncode == 2
    assert "has no requirements.txt" in completed.stderr
