"""A fit whose stdout is not a terminal (a log file) prints plain lines: progress every 5 % of the frame budget and
one line per evaluation (training/callbacks/progress_lines.py), where the rich bar printed nothing until the end."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from iquitos_lightning.cli import run_lightning_cli
from iquitos_lightning.control.reference_results import REFERENCES_VERSION
from iquitos_lightning.site.config import load_site_config
from iquitos_lightning.training.callbacks.progress_lines import LineProgressBar, draws_a_bar, next_line_at
from iquitos_lightning.training.reference_gap import RESULTS

REPO = Path(__file__).resolve().parents[3]
TINY = REPO / "configs" / "site" / "tiny.yaml"
RULE, OPTIMUM = -20.0, -10.0  # the thesis returns of the evaluation year's references written below
CLOCK = r"^\[\d+:\d\d:\d\d\] "
PROGRESS = re.compile(
    CLOCK + r"progress ([\d.]+) % \(([\d,]+)/1,120 frames\), ([\d,]+|-) frames/s, ETA (\S+), "
    r"(?:return (-?[\d,.]+), )?RSS [\d.]+ GB$",
    re.MULTILINE,
)
EVALUATION = re.compile(
    CLOCK + r"evaluation at ([\d,]+) frames: return (-?[\d.]+), bill ([\d,]+) PEN, gap closed (-?[\d.]+) %, "
    r"select/score (-?[\d.]+) \(best so far (-?[\d.]+)\)$",
    re.MULTILINE,
)


def _write_references(root: Path) -> None:
    """The tiny site's references on its evaluation year as ``baselines`` writes them, under ``root/results``."""
    site = load_site_config(TINY)
    thesis = {"rule_based": {"thesis_return": RULE}, "optimum_thesis": {"thesis_return": OPTIMUM}}
    references = {"site_config_hash": site.content_hash(), "references_version": REFERENCES_VERSION,
                  "objectives": {"thesis": thesis}}  # fmt: skip
    folder = root / RESULTS / site.name
    folder.mkdir(parents=True)
    (folder / "baselines.json").write_text(json.dumps(references))


def test_a_fit_off_a_terminal_prints_a_line_every_5_percent_and_one_per_evaluation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """SAC on the tiny site (smoke.yaml) for 1,120 frames in rollouts of 56 (5 % each), evaluated at 560 and 1,120
    with a selection year, its stdout not a terminal (pytest's capture, as a log file is to rich): 21 progress lines
    (the start, then every 5 %) and two evaluation lines whose figures are the ones logged to metrics.csv, with the
    gap against the references in the working folder's ``results/``. In this process (the command's own function,
    without a second ~10 s of imports), working in ``tmp_path`` (run folder, site data, references): the checkout's
    ``runs/``, ``data/`` and ``results/`` are not read or written."""
    _write_references(tmp_path)
    monkeypatch.chdir(tmp_path)
    code = run_lightning_cli(["fit", "--config", str(REPO / "configs" / "smoke.yaml"),
                              "--trainer.enable_progress_bar=true", "--trainer.enable_model_summary=true",
                              f"--trainer.logger.init_args.save_dir={tmp_path / 'runs'}", "--report.plots=false",
                              "--tracking.wandb=false", f"--model.init_args.env.site={TINY}",
                              f"--model.init_args.env.backend.data_root={tmp_path / 'data'}",
                              "--model.init_args.env.validation_site_seed=8",
                              "--model.init_args.rollout.frame_budget=1120",
                              "--model.init_args.rollout.eval_every_frames=560"])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0, text
    assert "\x1b" not in text and "\r" not in text  # no escape codes, no bar redrawn in place

    progress = PROGRESS.findall(text)
    assert [float(line[0]) for line in progress] == [5.0 * step for step in range(21)], text
    assert [int(line[1].replace(",", "")) for line in progress] == [56 * step for step in range(21)]
    assert all(line[2] != "-" for line in progress[1:])  # frames/s from the first rollout on
    assert progress[-1][3] == "0:00:00" and progress[-1][4]  # ETA reached; the last training return known

    evaluations = EVALUATION.findall(text)
    assert [line[0] for line in evaluations] == ["560", "1,120"], text
    with (tmp_path / "runs" / "smoke" / "version_0" / "metrics.csv").open() as rows:
        logged = [row for row in csv.DictReader(rows) if row["val/episode_return"]]
    best = -float("inf")
    for line, row in zip(evaluations, logged, strict=True):
        episode_return, bill, gap, score, best_so_far = float(line[1]), line[2], float(line[3]), *map(float, line[4:])
        assert episode_return == pytest.approx(float(row["val/episode_return"]), abs=0.006)
        assert bill == f"{float(row['val/kpi/tariff_cost']):,.0f}"
        assert gap == pytest.approx(100 * (episode_return - RULE) / (OPTIMUM - RULE), abs=0.1)
        assert score == pytest.approx(float(row["select/score"]), abs=0.006)
        best = max(best, score)
        assert best_so_far == best


@pytest.mark.parametrize(
    ("frames", "budget", "every_percent", "due"),
    [(0, 1_120, 5.0, 56), (56, 1_120, 5.0, 112), (1_000, 1_120, 5.0, 1_008), (500, 1_000, 30.0, 600), (0, 7, 5.0, 1)],
)
def test_the_next_line_is_due_at_the_next_share_of_the_budget(frames, budget, every_percent, due) -> None:
    """A rollout that crosses several marks gives one line, and the next is due at the mark after it."""
    assert next_line_at(frames, budget, every_percent) == due


def test_a_share_outside_the_budget_is_refused() -> None:
    with pytest.raises(ValueError, match=r"every_percent must be in \(0, 100\]"):
        LineProgressBar(every_percent=0)


def test_rich_draws_no_bar_into_a_file_and_a_terminal_can_be_declared(tmp_path, monkeypatch) -> None:
    """What the CLI asks before choosing the bar: stdout a real file (``> fit.log``) is no terminal; rich's
    ``TTY_COMPATIBLE=1`` declares one (and with it the rich bar)."""
    for name in ("TTY_COMPATIBLE", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    with (tmp_path / "fit.log").open("w") as log:
        monkeypatch.setattr("sys.stdout", log)
        assert not draws_a_bar()
        monkeypatch.setenv("TTY_COMPATIBLE", "1")
        assert draws_a_bar()
