"""A pytest plugin that records each test's CPU time, for ``benchmarks/suite_time.py --per-test N``.

Why: the suite's seconds say how long, not where. Each test's own CPU (user + system of the pytest process that ran
it) and the CPU of the child processes it started and waited for (``RUSAGE_CHILDREN``: the ``python -m
iquitos_lightning`` commands, g++ for Inductor, pip) are what a cut is chosen by; wall time on a busy 2-core machine
mixes in the other workers. Processes a test did not wait for are not counted (collection workers are the fork
server's children, counted when it exits; Ray's processes are its ``ray start``'s).

Loaded by name (``-p per_test_cpu``, this folder on ``PYTHONPATH``); writes one JSON line a test to
``$PER_TEST_CPU_DIR/<xdist worker>.jsonl`` and does nothing where that variable is unset.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator
from pathlib import Path

import pytest

DIRECTORY_VARIABLE = "PER_TEST_CPU_DIR"


def children_cpu_s() -> float:
    """CPU seconds (user + system) of every child this process has waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu_s() -> tuple[float, float]:
    """This process's CPU seconds and those of the children it has waited for."""
    own = os.times()
    return own.user + own.system, children_cpu_s()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    directory = os.environ.get(DIRECTORY_VARIABLE)
    own_before, children_before = _cpu_s()
    started_at = time.time()  # the epoch, comparable across the workers
    start = time.monotonic()
    yield
    if directory is None:
        return
    own_after, children_after = _cpu_s()
    row = {
        "test": item.nodeid,
        "own_s": round(own_after - own_before, 3),
        "children_s": round(children_after - children_before, 3),
        "wall_s": round(time.monotonic() - start, 3),
        "slow": item.get_closest_marker("slow") is not None,
        "started_at": round(started_at, 3),
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
    }
    worker = row["worker"]
    with (Path(directory) / f"{worker}.jsonl").open("a") as log:
        log.write(json.dumps(row) + "\n")


def read_rows(directory: Path) -> list[dict]:
    """Every test's row the plugin wrote under ``directory``."""
    return [json.loads(line) for path in sorted(directory.glob("*.jsonl")) for line in path.read_text().splitlines()]


def summary(rows: list[dict], suite_cpu_s: float, top: int) -> str:
    """The tests' CPU against the suite's, the shares of the 100 heaviest and of the ``slow``-marked ones, and the
    ``top`` heaviest tests, as Markdown."""
    cpu = sorted(((row["own_s"] + row["children_s"], row) for row in rows), key=lambda pair: -pair[0])
    tests_s = sum(seconds for seconds, _ in cpu)
    heaviest_s = sum(seconds for seconds, _ in cpu[:100])
    slow = [seconds for seconds, row in cpu if row["slow"]]
    first = min((row["started_at"] for row in rows), default=0.0)
    lines = [
        f"tests: {len(rows)}, {tests_s:.0f} s of CPU of the suite's {suite_cpu_s:.0f} s "
        f"(the rest: pytest's workers starting and collecting, processes no test waited for)",
        f"the 100 heaviest: {heaviest_s:.0f} s ({100 * heaviest_s / max(tests_s, 1e-9):.0f} %); "
        f"the {len(slow)} marked slow: {sum(slow):.0f} s",
        "",
        *tail(rows, first),
        "",
        "| CPU s | own s | children s | wall s | started at s | worker | test |",
        "|---|---|---|---|---|---|---|",
    ]
    for seconds, row in cpu[:top]:
        lines.append(
            f"| {seconds:.1f} | {row['own_s']:.1f} | {row['children_s']:.1f} | {row['wall_s']:.1f} "
            f"| {row['started_at'] - first:.0f} | {row['worker']} | {row['test']} |"
        )
    return "\n".join(lines)


def tail(rows: list[dict], first: float) -> list[str]:
    """When each worker ran its last test (seconds after ``first``, the first test's start), and the tests still
    running once the first worker had nothing left.

    Why: on 2 cores the suite's wall is its CPU / 2 only while every worker has a test; a long test that starts late
    runs alone at the end (the order xdist hands tests out in decides that, not the tests' cost)."""
    ends: dict[str, float] = {}
    for row in rows:
        ends[row["worker"]] = max(ends.get(row["worker"], 0.0), row["started_at"] + row["wall_s"])
    if not ends:
        return []
    first_idle = min(ends.values())
    lines = [
        "each worker's last test ended at (s after the first test started): "
        + ", ".join(f"{worker} {end - first:.0f}" for worker, end in sorted(ends.items()))
    ]
    late = sorted(
        (row for row in rows if row["started_at"] + row["wall_s"] > first_idle), key=lambda r: r["started_at"]
    )
    for row in late:
        if row["wall_s"] >= 5:
            lines.append(
                f"  still running then: {row['test']} ({row['worker']}, from {row['started_at'] - first:.0f} s"
                f" for {row['wall_s']:.0f} s)"
            )
    return lines
