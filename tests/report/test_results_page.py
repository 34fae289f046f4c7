"""The site's results page lists what today's commands remake; older experiment folders are one archive link."""

from __future__ import annotations

from pathlib import Path

from iquitos_lightning.report.results_page import results_page, write_results_page

COMMAND = "python -m iquitos_lightning compare --agents sac --seeds 1"


def _table_page(path: Path, command: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# A table\n\nMade by `{command}` at git revision `abc`.\n\n| row |\n|:---|\n| a |\n")


def test_archived_folders_are_not_listed_and_the_archive_is_one_link(tmp_path: Path) -> None:
    site = tmp_path / "results" / "site-x"
    _table_page(site / "comparison_tariff.md", COMMAND)
    archive = tmp_path / "results" / "archive"
    old_command = "python -m iquitos_lightning compare --old"
    _table_page(archive / "site-x" / "old-experiment" / "comparison_tariff.md", old_command)
    (archive / "README.md").write_text("# Archive\n")

    page = write_results_page(site).read_text()

    assert f"Made by `{COMMAND}`: [comparison_tariff.md](comparison_tariff.md)." in page
    assert "[archive/](../archive/README.md)" in page and "today's commands do not remake them" in page
    assert "old-experiment" not in page and "--old" not in page
    assert "| folder |" not in page  # no folder table: no command writes a folder into the site's results


def test_no_archive_line_where_the_archive_does_not_hold_the_site(tmp_path: Path) -> None:
    site = tmp_path / "results" / "site-x"
    _table_page(site / "comparison_tariff.md", COMMAND)
    assert "archive" not in results_page(site)  # a --results folder of the user's own: no link to nowhere

    archive = tmp_path / "results" / "archive"
    _table_page(archive / "other-site" / "old-experiment" / "comparison_tariff.md", COMMAND)
    (archive / "README.md").write_text("# Archive\n")
    assert "archive" not in results_page(site)  # the archive holds another site only


def test_every_figure_the_baselines_command_writes_is_on_the_page(tmp_path: Path) -> None:
    site = tmp_path / "results" / "site-x"
    _table_page(site / "baselines.md", "python -m iquitos_lightning baselines")
    for figure in ("dispatch_week.png", "monthly_energy.png"):
        (site / figure).write_bytes(b"\x89PNG")
    page = results_page(site)
    assert "(dispatch_week.png)" in page and "(monthly_energy.png)" in page
