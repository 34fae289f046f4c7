"""Every profile the README and docs/ name exists: a user copying a command from them never meets a missing file.

docs/experiments.md is the log: its entries name the profiles of their time (some since removed; git keeps them at
the revision the results' own files record), so it is not held to today's tree."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROFILE = re.compile(r"configs/[\w./-]+?\.yaml")


def test_every_config_path_in_the_readme_and_docs_exists():
    named = {
        (doc.relative_to(REPO).as_posix(), path)
        for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
        if doc.name != "experiments.md"
        for path in PROFILE.findall(doc.read_text())
    }
    assert len(named) > 15  # the README's card profiles and the docs' experiment profiles are found
    assert [entry for entry in sorted(named) if not (REPO / entry[1]).is_file()] == []
