"""No "session N" marker or revision hash in the README, the reference docs, the configs, the package or its
instruments (``benchmarks/``).

Provenance lives in the results' own files (command, commit, seeds) and history in docs/experiments.md (the log)
and git; reference docs, config comments and docstrings say what a thing does and why, with the figures they rely on.
The scripts a GPU measurement ran (``benchmarks/gpu-check-scripts/``) are records beside its results, kept as run.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"[Ss]ession [0-9]|revision [0-9a-f]{7}")
CHECKED = ("README.md", "docs", "configs", "iquitos_lightning", "benchmarks")
LOG = REPO / "docs" / "experiments.md"
RECORDS = REPO / "benchmarks" / "gpu-check-scripts"
TEXT_SUFFIXES = {".md", ".py", ".yaml", ".yml", ".txt"}


def checked_files() -> list[Path]:
    files: list[Path] = []
    for name in CHECKED:
        path = REPO / name
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        files += [
            file
            for file in candidates
            if file.is_file() and file.suffix in TEXT_SUFFIXES and file != LOG and not file.is_relative_to(RECORDS)
        ]
    return files


def test_no_session_markers_or_revision_hashes_outside_the_log():
    files = checked_files()
    assert REPO / "README.md" in files and any(file.suffix == ".yaml" for file in files)  # the walk finds them
    assert REPO / "benchmarks" / "suite_time.py" in files
    found = [
        f"{file.relative_to(REPO).as_posix()}:{number}: {line.strip()}"
        for file in files
        for number, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), start=1)
        if MARKER.search(line)
    ]
    assert found == [], "history markers outside docs/experiments.md:\n" + "\n".join(found)
