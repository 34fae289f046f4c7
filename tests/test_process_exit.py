"""The command line ends its process without Python's teardown, and nothing it says or returns is lost by that.

The children here run ``build-site`` on the tiny site (no torch: ~2 s each); the exit is the same for every
command, and the fits, interrupts and W&B runs of the other process tests go through it too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY = str(REPO / "configs" / "site" / "tiny.yaml")
# A global whose finaliser says whether the interpreter was torn down, and 1 MB of stdout still in its buffer when
# the command starts: both before the command line is run, as main() or as main([...]); then an atexit handler
# registered after the command, as the libraries a command imports register theirs.
CHILD = """
import atexit
import sys
from iquitos_lightning.__main__ import main

class Teardown:
    def __del__(self):
        print("torn down", file=sys.stderr, flush=True)

marker = Teardown()
sys.stdout.write("x" * 1_000_000 + "\\n")
way = sys.argv.pop(1)
code = main() if way == "program" else main(sys.argv[1:])
atexit.register(print, "a later handler ran", file=sys.stderr, flush=True)  # as logging's, W&B's, Ray's
sys.exit(code)
"""


def _run(way: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``args`` run by ``main()`` as the process's own command line (``way="program"``, as ``python -m
    iquitos_lightning`` runs them), or by ``main(args)`` called in a program (``way="function"``)."""
    command = [sys.executable, "-c", CHILD, way, *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_program_skips_the_teardown_and_keeps_its_output_and_status(tmp_path: Path) -> None:
    built = _run("program", "build-site", "--site", TINY, "--out", str(tmp_path / "tiny"))
    assert built.returncode == 0, built.stderr[-2000:]
    assert "torn down" not in built.stderr  # ended without Python's teardown
    assert "a later handler ran" in built.stderr  # after every atexit handler registered after it
    assert built.stdout.startswith("x" * 1_000_000 + "\n") and "Site tiny: calibration" in built.stdout  # all flushed

    called = _run("function", "build-site", "--site", TINY, "--out", str(tmp_path / "tiny"))
    assert called.returncode == 0 and "torn down" in called.stderr  # main([...]) in a program: a normal exit


def test_an_error_and_a_usage_error_keep_their_exit_status_through_the_fast_exit(tmp_path: Path) -> None:
    missing = _run("program", "build-site", "--site", str(tmp_path / "missing.yaml"))
    assert missing.returncode == 2 and "error: site config" in missing.stderr and "torn down" not in missing.stderr
    usage = _run("program", "build-site", "--no-such-option")
    assert usage.returncode == 2 and "unrecognized arguments: --no-such-option" in usage.stderr
    assert "torn down" not in usage.stderr  # argparse's SystemExit(2) is recorded too
