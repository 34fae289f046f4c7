"""Time the test suite beside a measure of the machine's speed taken in the same run, so runs compare across hours.

    python benchmarks/suite_time.py                  # this checkout's suite, as it is
    python benchmarks/suite_time.py --fresh-clone    # a clone of HEAD: data/ and Inductor's cache cold, as on CI
    python benchmarks/suite_time.py --fresh-clone --per-test 30   # and the 30 heaviest tests by CPU

Why the second figure: on a shared virtual machine the same work costs more or less CPU from one hour to the next
(the same tree's suite took 712 s at 09:35 and 828 s at 10:41 here, nothing else running; the ``import`` below
9.5 s then 12.5 s of CPU). A suite time alone says as much about the hour as about the code. The calibration is the
CPU time of the start-up every test process and every ``python -m iquitos_lightning`` child pays (``import
iquitos_lightning.cli``: Python, torch, Lightning, TorchRL), the median of three, taken just before and just after
the suite; the suite's CPU divided by it (``start-ups``) is what two runs of different hours compare by. The
install (``scripts/install.sh``) is not timed: the suite runs with this checkout's ``.venv``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import per_test_cpu
from per_test_cpu import children_cpu_s

REPO = Path(__file__).resolve().parents[1]
CALIBRATION = "import iquitos_lightning.cli"


def start_up_cpu_s(tree: Path, environment: dict[str, str], repeats: int = 3) -> float:
    """The median CPU seconds of a fresh interpreter importing the package's command line from ``tree``."""
    samples = []
    for _ in range(repeats):
        before = children_cpu_s()
        subprocess.run([sys.executable, "-c", CALIBRATION], cwd=tree, env=environment, check=True)
        samples.append(children_cpu_s() - before)
    return statistics.median(samples)


def run_suite(tree: Path, environment: dict[str, str], pytest_args: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (every process the suite started and waited for) and pytest's exit status."""
    before, start = children_cpu_s(), time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args],
                          cwd=tree, env=environment)  # fmt: skip
    return time.monotonic() - start, children_cpu_s() - before, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fresh-clone", action="store_true", help="run the suite of a fresh clone of HEAD")
    parser.add_argument(
        "--per-test", type=int, default=0, metavar="N",
        help="record each test's CPU (benchmarks/per_test_cpu.py) and print the N heaviest",
    )  # fmt: skip
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="suite-time-") as scratch:
        tree = REPO
        if args.fresh_clone:
            tree = Path(scratch) / "clone"
            subprocess.run(["git", "clone", "--quiet", str(REPO), str(tree)], check=True)
            (tree / ".venv").symlink_to(REPO / ".venv")  # a clone after scripts/install.sh (its scripts use .venv)
            # and the package's bytecode, install.sh's last step (pip's other steps would repoint .venv at the clone)
            subprocess.run([sys.executable, "-m", "compileall", "-q", "iquitos_lightning"], cwd=tree, check=True)
        environment = {
            **os.environ,
            # the tree's package, with this checkout's .venv (and any plugin path the caller set after it)
            "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")])),
            "WANDB_MODE": "offline",  # as .ci/run
            "TORCHINDUCTOR_CACHE_DIR": str(Path(scratch) / "inductor"),  # cold, as on CI
        }
        pytest_args = list(args.pytest_args)
        records = Path(scratch) / "per-test"
        if args.per_test:
            records.mkdir()
            environment[per_test_cpu.DIRECTORY_VARIABLE] = str(records)
            environment["PYTHONPATH"] += os.pathsep + str(Path(__file__).resolve().parent)  # the plugin, by name
            pytest_args = ["-p", "per_test_cpu", *pytest_args]
        startup_before = start_up_cpu_s(tree, environment)
        wall, cpu, status = run_suite(tree, environment, pytest_args)
        startup_after = start_up_cpu_s(tree, environment)
        per_test = per_test_cpu.read_rows(records) if args.per_test else []
    startup = (startup_before + startup_after) / 2
    row = {
        "tree": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip(),
        "fresh_clone": args.fresh_clone,
        "pytest_status": status,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "start_up_cpu_s_before": round(startup_before, 2),
        "start_up_cpu_s_after": round(startup_after, 2),
        "suite_in_start_ups": round(cpu / startup, 1),
        "wall_in_start_ups": round(wall / startup, 1),
    }
    print(f"suite: {wall:.0f} s wall, {cpu:.0f} s CPU (pytest exit {status})")
    print(f"start-up ({CALIBRATION}): {startup_before:.2f} s CPU before, {startup_after:.2f} s after")
    print(f"the suite in start-ups: {row['suite_in_start_ups']} of CPU, {row['wall_in_start_ups']} of wall")
    print(json.dumps(row), flush=True)
    if per_test:
        print(per_test_cpu.summary(per_test, cpu, args.per_test), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
