"""Time the test suite beside a measure of the machine's speed taken in the same run, so runs compare across hours.

    python benchmarks/suite_time.py                  # this checkout's suite, as it is
    python benchmarks/suite_time.py --fresh-clone    # a clone of HEAD: data/ and Inductor's cache cold, as on CI
    python benchmarks/suite_time.py --fresh-clone --per-test 30   # and the 30 heaviest tests by CPU
    python benchmarks/suite_time.py --against 975575d   # fresh clones of 975575d and HEAD, alternating, and the ratio

Why the second figure: on a shared virtual machine the same work costs more or less CPU from one hour to the next
(the same tree's suite took 712 s at 09:35 and 828 s at 10:41 here, nothing else running; the ``import`` below
9.5 s then 12.5 s of CPU). A suite time alone says as much about the hour as about the code. The calibration is the
CPU time of the start-up every test process and every ``python -m iquitos_lightning`` child pays (``import
iquitos_lightning.cli``: Python, torch, Lightning, TorchRL), the median of three, taken just before and just after
the suite; the suite's CPU divided by it (``start-ups``) is what two runs of different hours compare by. The
install (``scripts/install.sh``) is not timed: the suite runs with this checkout's ``.venv``.

Why ``--against``: "the suite stays under its budget" is a claim about a change, and the fairest reading of it is
the suite before and after the change in the same minutes, on fresh clones of both, in the order old, new, new, old
(``--rounds 2``; the machine drifts within an hour, so each tree gets an early and a late run): the ratio of their
wall times is what the change did, whatever the hour did to both.
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


def python_path_with(tree: Path) -> str:
    """``PYTHONPATH`` with ``tree``'s package first (and any path the caller set after it)."""
    return os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))


def start_up_cpu_s(repeats: int = 3) -> float:
    """The median CPU seconds of a fresh interpreter importing this checkout's command line. Always this checkout's,
    whatever tree is timed: with ``--against`` an older tree's own imports differ, and the calibration must measure
    the machine, not the tree."""
    environment = {**os.environ, "PYTHONPATH": python_path_with(REPO)}
    samples = []
    for _ in range(repeats):
        before = children_cpu_s()
        subprocess.run([sys.executable, "-c", CALIBRATION], cwd=REPO, env=environment, check=True)
        samples.append(children_cpu_s() - before)
    return statistics.median(samples)


def run_suite(tree: Path, environment: dict[str, str], pytest_args: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (every process the suite started and waited for) and pytest's exit status."""
    before, start = children_cpu_s(), time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args],
                          cwd=tree, env=environment)  # fmt: skip
    return time.monotonic() - start, children_cpu_s() - before, done.returncode


def revision_of(tree: Path) -> str:
    """The short commit ``tree`` has checked out."""
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True)
    return done.stdout.strip()


def fresh_clone(scratch: Path, revision: str | None) -> Path:
    """A clone of this checkout at ``revision`` (HEAD when None) in ``scratch``, as after ``scripts/install.sh``: this
    checkout's ``.venv`` linked in and the packages' bytecode compiled (install.sh's last step; pip's other steps
    would repoint ``.venv`` at the clone)."""
    tree = scratch / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(tree)], check=True)
    if revision is not None:
        subprocess.run(["git", "checkout", "--quiet", revision], cwd=tree, check=True)
    (tree / ".venv").symlink_to(REPO / ".venv")
    packages = [name for name in ("iquitos_lightning", "benchmarks") if (tree / name).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], cwd=tree, check=True)
    return tree


def measure(tree: Path, scratch: Path, pytest_args: list[str], per_test: int) -> tuple[dict, list[dict]]:
    """The suite of ``tree`` timed beside the start-up before and after it: its row, and each test's record when
    ``per_test``. Inductor's cache is ``scratch``'s own (cold, as on CI)."""
    environment = {
        **os.environ,
        # the tree's package, with this checkout's .venv (and any plugin path the caller set after it)
        "PYTHONPATH": python_path_with(tree),
        "WANDB_MODE": "offline",  # as .ci/run
        "TORCHINDUCTOR_CACHE_DIR": str(scratch / "inductor"),
    }
    records = scratch / "per-test"
    if per_test:
        records.mkdir()
        environment[per_test_cpu.DIRECTORY_VARIABLE] = str(records)
        environment["PYTHONPATH"] += os.pathsep + str(Path(__file__).resolve().parent)  # the plugin, by name
        pytest_args = ["-p", "per_test_cpu", *pytest_args]
    startup_before = start_up_cpu_s()
    wall, cpu, status = run_suite(tree, environment, pytest_args)
    startup_after = start_up_cpu_s()
    startup = (startup_before + startup_after) / 2
    row = {
        "tree": revision_of(tree),
        "fresh_clone": tree != REPO,
        "pytest_status": status,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "start_up_cpu_s_before": round(startup_before, 2),
        "start_up_cpu_s_after": round(startup_after, 2),
        "suite_in_start_ups": round(cpu / startup, 1),
        "wall_in_start_ups": round(wall / startup, 1),
    }
    print(f"{row['tree']}: {wall:.0f} s wall, {cpu:.0f} s CPU (pytest exit {status})")
    print(f"start-up ({CALIBRATION}): {startup_before:.2f} s CPU before, {startup_after:.2f} s after")
    print(f"the suite in start-ups: {row['suite_in_start_ups']} of CPU, {row['wall_in_start_ups']} of wall")
    print(json.dumps(row), flush=True)
    return row, per_test_cpu.read_rows(records) if per_test else []


def run_once(revision: str | None, fresh: bool, pytest_args: list[str], per_test: int) -> dict:
    """One timed suite: this checkout's, or a fresh clone's at ``revision``; the per-test summary printed after it."""
    with tempfile.TemporaryDirectory(prefix="suite-time-") as scratch:
        tree = fresh_clone(Path(scratch), revision) if fresh else REPO
        row, records = measure(tree, Path(scratch), pytest_args, per_test)
    if records:
        print(per_test_cpu.summary(records, row["cpu_s"], per_test), flush=True)
    return row


def compare(names: dict[str, str], runs: dict[str, list[dict]]) -> str:
    """The two trees' runs (``runs["old"]``, ``runs["new"]``, the trees ``names`` names) side by side and the ratio
    of their mean wall and CPU times (new over old)."""
    lines = ["| tree | walls s | CPUs s | start-ups s (before/after) |", "|---|---|---|---|"]
    for side in ("old", "new"):
        name, rows = names[side], runs[side]
        walls = ", ".join(f"{row['wall_s']:.0f}" for row in rows)
        cpus = ", ".join(f"{row['cpu_s']:.0f}" for row in rows)
        starts = ", ".join(f"{row['start_up_cpu_s_before']:.1f}/{row['start_up_cpu_s_after']:.1f}" for row in rows)
        lines.append(f"| {name} | {walls} | {cpus} | {starts} |")
    for key, label in (("wall_s", "wall"), ("cpu_s", "CPU")):
        ratio = statistics.mean(row[key] for row in runs["new"]) / statistics.mean(row[key] for row in runs["old"])
        lines.append(f"{names['new']} over {names['old']}, {label}: {ratio:.3f}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fresh-clone", action="store_true", help="run the suite of a fresh clone of HEAD")
    parser.add_argument(
        "--per-test", type=int, default=0, metavar="N",
        help="record each test's CPU (benchmarks/per_test_cpu.py) and print the N heaviest",
    )  # fmt: skip
    parser.add_argument(
        "--against", metavar="REV",
        help="also time a fresh clone of REV, alternating with HEAD's (implies --fresh-clone), and print the ratio",
    )  # fmt: skip
    parser.add_argument(
        "--rounds", type=int, default=1, metavar="K",
        help="with --against: K rounds, in the order old, new, then new, old, ... (default 1)",
    )  # fmt: skip
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    if args.against is None:
        return run_once(None, args.fresh_clone, list(args.pytest_args), args.per_test)["pytest_status"]
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    names = {"old": args.against, "new": revision_of(REPO)}
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    for round_index in range(args.rounds):
        order = ("old", "new") if round_index % 2 == 0 else ("new", "old")
        for side in order:
            revision = args.against if side == "old" else None
            runs[side].append(run_once(revision, True, list(args.pytest_args), args.per_test))  # both alike: fair
    print(compare(names, runs), flush=True)
    return max(row["pytest_status"] for rows in runs.values() for row in rows)


if __name__ == "__main__":
    sys.exit(main())
