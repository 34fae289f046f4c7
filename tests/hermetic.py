"""The suite keeps out of the user's folders: no test may write the checkout's ``runs/`` (the user's own runs: the
README's main job fills ``runs/smoke``) or ``results/`` (the committed results pages).

Why a check at the end of the session and not a rule in a review: a test that parsed a config into the checkout's
``runs/smoke`` passed on CI's clean clone and failed after the README's first command had run there (issue 81); a
listing of both folders before and after the session (each file's size and modification time) catches any test
that writes there, whichever test it is. ``tests/conftest.py`` takes the listings in the controlling process and
fails the session, naming the files, when they differ.
"""

from __future__ import annotations

from pathlib import Path

USER_FOLDERS = ("runs", "results")


def listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root``'s user folders: its path relative to ``root`` -> (size, modification time, ns)."""
    files = {}
    for folder in USER_FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file():
                stat = path.stat()
                files[path.relative_to(root).as_posix()] = (stat.st_size, stat.st_mtime_ns)
    return files


def changed_files(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """The files made, removed or rewritten between two listings, sorted."""
    return sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))
