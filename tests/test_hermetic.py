"""The session's check that no test writes the user's folders (tests/hermetic.py): it sees a file made, one
rewritten and one removed under runs/ or results/, and nothing elsewhere."""

from __future__ import annotations

import os

from hermetic import changed_files, listing


def test_a_file_made_rewritten_or_removed_in_runs_or_results_is_named_and_other_folders_are_not(tmp_path) -> None:
    (tmp_path / "runs" / "smoke").mkdir(parents=True)
    (tmp_path / "results").mkdir()
    (tmp_path / "data").mkdir()
    kept, rewritten, removed = (
        tmp_path / "results" / "page.md",
        tmp_path / "runs" / "smoke" / "a.ckpt",
        tmp_path / "results" / "old.csv",
    )
    for path in (kept, rewritten, removed):
        path.write_text("x")
    before = listing(tmp_path)
    assert set(before) == {"results/page.md", "runs/smoke/a.ckpt", "results/old.csv"}
    (tmp_path / "data" / "cache.bin").write_text("anything")  # not a user folder of the check
    os.utime(rewritten, ns=(0, 10**9))  # the same size, another time: a rewrite
    removed.unlink()
    (tmp_path / "runs" / "smoke" / "last.ckpt").write_text("new")
    assert changed_files(before, listing(tmp_path)) == ["results/old.csv", "runs/smoke/a.ckpt", "runs/smoke/last.ckpt"]
    assert changed_files(before, before) == []
