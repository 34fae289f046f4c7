"""The site's results page lists what today's commands remake; older experiment folders are one archive link."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from iquitos_lightning.report.loss_split import loss_split_markdown
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


def test_the_test_years_split_and_the_levers_tried_follow_the_test_year_table(tmp_path: Path) -> None:
    """The page says which loss an agent's remaining gap is (the split test-years writes) and what was tried
    against it (levers_tariff.md's table), after the test-year table; without them, neither heading."""
    site = tmp_path / "results" / "site-x"
    table = pd.DataFrame(
        {"gap_closed_pct": [100.0, 100.0, 90.0, 89.3]},
        index=["optimum_tariff", "mpc_perfect_tariff", "ppo+oracle", "ppo"],
    )
    split = loss_split_markdown(table, ["ppo+oracle", "ppo"], "optimum_tariff", "mpc_perfect_tariff")
    test_years = ["# Test years", "", f"Made by `{COMMAND}` at git revision `abc`.", "", "| row |", "|:---|", "| ppo |"]
    site.mkdir(parents=True)
    (site / "test_years_tariff.md").write_text("\n".join([*test_years, "", "Some words.", "", *split, "More."]) + "\n")
    assert "What was tried" not in results_page(site)  # the split, but no levers page: no levers heading
    assert "| ppo | 10.7 | 0.0 | 10.0 | 0.7 |" in results_page(site)

    (site / "levers_tariff.md").write_text("# Levers\n\n| lever | 2026 |\n|:---|---:|\n| twice the budget | 89.6 |\n")
    page = results_page(site)
    assert page.index("| ppo |") < page.index("| ppo | 10.7 |") < page.index("| twice the budget | 89.6 |")
    assert "More." not in page and "Some words." not in page  # the split's paragraph and table, nothing after
    assert "[levers_tariff.md](levers_tariff.md)" in page
