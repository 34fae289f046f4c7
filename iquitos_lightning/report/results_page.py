"""``results/<site>/README.md``: the one page a reader opens, written by every command that writes a table there.

Why generated: a results page kept by hand drifts from the tables (the README grew into a lab notebook that way).
``baselines``, ``compare``, ``test-years``, ``tune-reference`` and ``tune`` each call :func:`write_results_page` after
writing their files, so the page always shows what the folder holds: the test-year table and its regret ladder
first (the figures a reviewer accepts), then the development year's comparison, the references and the tuning studies
(each table's own page keeps its command, git revision and seeds: that line is read back from it).

Only what these commands remake is listed: none of them writes a folder here. Experiment folders that earlier
revisions wrote, on the site profile of their time, live in ``results/archive/<site>/`` (its README names each one's
revision and command); the page gives one line pointing there when the archive holds this site.
"""

from __future__ import annotations

import re
from pathlib import Path

from iquitos_lightning.atomic_files import write_atomically
from iquitos_lightning.report.loss_split import SPLIT_INTRO

PAGE_NAME = "README.md"
MADE_BY = re.compile(r"Made by `([^`]+)`")
OBJECTIVES_SHOWN = ("tariff", "thesis")
LEVERS = "levers_tariff.md"  # what was tried against the agents' remaining gap (one change each, its own seeds)
ARCHIVE = "archive"  # results/archive/: folders earlier revisions made, which no command here remakes


def made_by(page: Path) -> str | None:
    """The command a table's page says made it (its ``Made by `...``` line), or None."""
    if not page.is_file():
        return None
    found = MADE_BY.search(page.read_text())
    return found.group(1) if found else None


def first_table(page: Path) -> list[str]:
    """The first Markdown table of ``page`` (its lines), or none."""
    lines, table = page.read_text().splitlines(), []
    for line in lines:
        if line.startswith("|"):
            table.append(line)
        elif table:
            break
    return table


def paragraph_and_table(page: Path, first_words: str) -> list[str]:
    """The paragraph of ``page`` that starts with ``first_words`` and the Markdown table after it (none if absent)."""
    lines = page.read_text().splitlines()
    start = next((number for number, line in enumerate(lines) if line.startswith(first_words)), None)
    if start is None:
        return []
    kept, in_table = [], False
    for line in lines[start:]:
        in_table = in_table or line.startswith("|")
        if in_table and not line.startswith("|"):
            break
        kept.append(line)
    return kept


def _command_line(page: Path) -> str:
    command = made_by(page)
    return f"Made by `{command}`: [{page.name}]({page.name})." if command else f"[{page.name}]({page.name})."


def _figure(site_dir: Path, name: str, caption: str) -> list[str]:
    return [f"![{caption}]({name})", ""] if (site_dir / name).is_file() else []


def _test_years(site_dir: Path) -> list[str]:
    page = site_dir / "test_years_tariff.md"
    if not page.is_file():
        return []
    lines = ["## Test years: every row on site years no design choice ever read", ""]
    lines += _figure(site_dir, "regret_ladder_tariff.png", "regret ladder: each row's bill, energy and demand charge")
    lines += [*first_table(page), "", _command_line(page)]
    if (site_dir / "monthly_bill_tariff.csv").is_file():
        lines[-1] += " Every row's bill by month: [monthly_bill_tariff.csv](monthly_bill_tariff.csv)."
    split = paragraph_and_table(page, SPLIT_INTRO)
    return [*lines, "", *([*split, ""] if split else []), *_levers(site_dir)]


def _levers(site_dir: Path) -> list[str]:
    """What was tried against the remaining gap: the first table of ``levers_tariff.md`` (each row a change to a card
    profile on its own seeds, with the command that trained it), after the split that says which gap it aims at."""
    page = site_dir / LEVERS
    if not page.is_file():
        return []
    lines = ["### What was tried against the remaining gap", "", *first_table(page), ""]
    return [*lines, f"Each row's command and its curves: [{LEVERS}]({LEVERS}).", ""]


def _development_year(site_dir: Path) -> list[str]:
    lines = []
    for objective in OBJECTIVES_SHOWN:
        page = site_dir / f"comparison_{objective}.md"
        if not page.is_file():
            continue
        lines += [f"## Development year, objective `{objective}`: agents against the references", ""]
        lines += _figure(site_dir, f"learning_curves_{objective}.png", f"learning curves, {objective}")
        lines += [_command_line(page), ""]
    return lines


def _references(site_dir: Path) -> list[str]:
    page = site_dir / "baselines.md"
    if not page.is_file():
        return []
    lines = ["## Reference controllers on the development year", ""]
    lines += _figure(site_dir, "dispatch_week.png", "a week of dispatch")
    lines += _figure(site_dir, "monthly_energy.png", "the year's energy by month and controller")
    return [*lines, _command_line(page), ""]


def _tunings(site_dir: Path) -> list[str]:
    pages = sorted(site_dir.glob("tune_*.md"))
    if not pages:
        return []
    lines = ["## Tuning studies", ""]
    for page in pages:
        command = made_by(page)
        lines.append(f"- [{page.name}]({page.name})" + (f": `{command}`" if command else ""))
    return [*lines, ""]


def _archive(site_dir: Path) -> list[str]:
    """One line pointing to ``../archive/README.md`` where the archive holds this site's older experiments, else none.

    None for a ``--results`` folder of the user's own: no link to nowhere."""
    archive = site_dir.parent / ARCHIVE
    if not (archive / PAGE_NAME).is_file() or not (archive / site_dir.name).is_dir():
        return []
    return [
        "## Older experiments",
        "",
        f"Experiment folders made by earlier revisions, on the site profile of their time, are in [{ARCHIVE}/]"
        f"(../{ARCHIVE}/{PAGE_NAME}) (their story: docs/experiments.md); today's commands do not remake them.",
        "",
    ]


def results_page(site_dir: Path) -> str:
    """The page's Markdown for the folder as it is now."""
    site_dir = Path(site_dir)
    intro = [
        f"# Results: site `{site_dir.name}`",
        "",
        "Written by the commands that make the tables below (`baselines`, `compare`, `test-years`, `tune-reference`, "
        "`tune`) each time one of them writes here: edit the commands, not this page. Each table's page gives its "
        "command, git revision and seeds, and for every row what it knew ahead and which site years it trained on.",
        "",
    ]
    sections = _test_years(site_dir) + _development_year(site_dir) + _references(site_dir)
    return "\n".join(intro + sections + _tunings(site_dir) + _archive(site_dir)).rstrip() + "\n"


def write_results_page(site_dir: Path) -> Path:
    """Write ``site_dir/README.md`` (:func:`results_page`) and return its path."""
    path = Path(site_dir) / PAGE_NAME
    write_atomically(results_page(site_dir).encode(), path, "results page")
    return path
