"""Where a result came from: the git revision its code ran at, recorded in every table a command writes.

Why its own module: ``baselines``, ``compare``, ``tune``, ``tune-reference`` and ``test-years`` all record it, and
``compare`` calls ``test-years``: a shared leaf in the report layer keeps them from importing one another for one
function.
"""

from __future__ import annotations

import subprocess


def git_revision() -> str:
    """The commit the code ran at (``+dirty`` when the tree has changes), or ``unknown`` outside git."""
    try:
        revision = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
        return revision.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
