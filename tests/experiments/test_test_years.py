"""``test-years`` (experiments/unseen_years.py) on the tiny site: references and a trained run's ``best.ckpt`` on years
the run never saw, the regret ladder and the monthly split; and the MPC's tuning (experiments/tune_reference.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import optuna
import pytest
import yaml

from iquitos_lightning.cli import run_lightning_cli
from iquitos_lightning.control.robust_mpc import RobustSettings, load_settings
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.experiments.study import open_storage
from iquitos_lightning.experiments.tune_reference import (
    STUDY,
    ReferenceTuneSettings,
    run_tune_reference,
    sample_settings,
)
from iquitos_lightning.experiments.unseen_years import agent_on_years, references_of_year, run_test_years

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "site" / "tiny.yaml"  # site seed 7: the reported year


@pytest.fixture(scope="module")
def runs_root(selecting_tiny_run: Path) -> Path:
    """The root of a compare-shaped run, ``tiny/tariff/sac-seed0`` (tests/conftest.py: 336 tiny-site frames on the
    twin (tariff), evaluated every 56 with selection year 8, ending with the test of ``best.ckpt`` on the twin)."""
    return selecting_tiny_run.parents[2]


def test_a_runs_best_checkpoint_on_its_own_year_bills_what_its_final_test_billed(runs_root: Path) -> None:
    run = runs_root / "tiny" / "tariff" / "sac-seed0"
    tested = json.loads((run / "report" / "test-twin" / "kpis.json").read_text())
    again = agent_on_years(run, (7,))[7]
    assert again["tariff_cost"] == pytest.approx(tested["tariff_cost"], rel=1e-6)
    assert again["frames_trained"] == json.loads((run / "kpis.json").read_text())["frames_trained"]
    other = agent_on_years(run, (9,))[9]
    assert other["tariff_cost"] != pytest.approx(tested["tariff_cost"], rel=1e-3)  # another year, another bill


def test_test_years_tabulates_references_and_agents_with_the_ladder_and_months(runs_root: Path, tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(ConfigError, match="other than the site's own 7"):
        run_test_years(TINY, ["sac"], (7, 9), runs_root, tmp_path / "results", ["test-years"], cache_root=cache)
    command = ["test-years", "--site", "tiny"]
    # the revision the calling command read at its start is recorded, not the tree's state once the pages are written
    started_at = "0123abc"
    out = run_test_years(
        TINY, ["sac"], (9, 10), runs_root, tmp_path / "results", command, cache_root=cache, revision=started_at
    )
    summary = json.loads((out / "test_years_tariff.json").read_text())
    assert (
        summary["git_revision"] == started_at
        and f"revision `{started_at}`" in (out / "test_years_tariff.md").read_text()
    )
    table = summary["table"]
    assert table["optimum_tariff"]["gap_closed_pct"] == pytest.approx(100.0)
    assert table["rule_based"]["gap_closed_pct"] == pytest.approx(0.0, abs=1e-9)
    assert table["sac"]["samples"] == 2 and summary["test_years"] == [9, 10]
    for name, row in table.items():
        assert row["bill"] >= table["optimum_tariff"]["bill"] * (1 - 1e-6), name  # LP tolerance
        assert row["max_import_kw"] > 0 and 1 <= row["worst_month"] <= 12
    assert table["mpc_perfect_tariff"]["gap_closed_pct"] > table["mpc_forecast_tariff"]["gap_closed_pct"]
    markdown = (out / "test_years_tariff.md").read_text()
    assert "Made by `python -m iquitos_lightning test-years --site tiny`" in markdown and "| sac |" in markdown
    assert (out / "regret_ladder_tariff.png").stat().st_size > 10_000
    monthly = (out / "monthly_bill_tariff.csv").read_text().splitlines()
    assert monthly[0] == "row,month,energy_and_co2,demand_charge" and len(monthly) > 7
    # the references of a year are read back from their cache: an edited cache is what a rerun reports
    cached = next((cache / "tiny").glob("references-9-*.json"))
    rows = json.loads(cached.read_text())
    rows["rule_based"]["tariff_cost"] = 123.0
    cached.write_text(json.dumps(rows))
    assert references_of_year(TINY, 9, cached.parent, console=None)["rule_based"]["tariff_cost"] == 123.0


def test_the_mpc_is_tuned_on_the_training_years_resumably_and_its_knobs_written(tmp_path):
    settings = ReferenceTuneSettings(
        site=TINY, trials=2, years=(8, 9), runs=tmp_path / "study", results=tmp_path / "results",
        out=tmp_path / "tuned.yaml", command=["tune-reference", "--trials", "2"],
    )  # fmt: skip
    with pytest.raises(ConfigError, match="the site's own"):
        run_tune_reference(ReferenceTuneSettings(site=TINY, years=(7, 8)))
    best = run_tune_reference(settings)
    written = yaml.safe_load(settings.out.read_text())["settings"]
    assert load_settings(settings.out) == best and set(written) == set(vars(RobustSettings()))
    table = (tmp_path / "results" / "tiny" / "tune_mpc_robust_tariff.csv").read_text().splitlines()
    assert len(table) == 3 and "gap_8" in table[0]  # two trials, each with its years' gaps
    first = table[1].split(",")
    assert first[table[0].split(",").index("envelope_days")] == "3"  # trial 0 is the hand-set hedge
    settings.trials = 3  # the same study goes on: one trial more, none repeated
    run_tune_reference(settings)
    assert len((tmp_path / "results" / "tiny" / "tune_mpc_robust_tariff.csv").read_text().splitlines()) == 4
    # a sitting stopped mid-trial leaves it running: the next marks it failed and runs its knobs again first
    study = optuna.load_study(study_name=STUDY, storage=open_storage(str(settings.runs / f"{STUDY}.journal")))
    cut = sample_settings(study.ask())
    settings.trials = 4
    run_tune_reference(settings)
    trials = optuna.load_study(study_name=STUDY, storage=open_storage(str(settings.runs / f"{STUDY}.journal"))).trials
    assert trials[3].state.name == "FAIL" and trials[4].state.name in ("COMPLETE", "PRUNED")  # judged (or pruned)
    assert RobustSettings(**{**vars(RobustSettings()), **trials[4].params}) == cut


def test_test_on_another_year_prints_the_bill_and_the_gap_against_that_years_references(runs_root, tmp_path, capsys):
    """``test --ckpt_path ... --model.init_args.env.site <a year's profile>``: the year has no baselines.json, so its
    rule-based and optimum bills are computed on the twin; the bill is the one ``test-years`` measures there."""
    run = runs_root / "tiny" / "tariff" / "sac-seed0"
    year = tmp_path / "tiny-seed9.yaml"
    year.write_text(f"base: {TINY}\nname: tiny-seed9\nseed: 9\n")
    sys.argv = sys.argv[:1]
    code = run_lightning_cli(["test", "--config", str(next(run.glob("version_*/config.yaml"))),
                              "--ckpt_path", str(run / "checkpoints" / "best.ckpt"),
                              "--model.init_args.env.site", str(year), "--tracking.wandb=false",
                              f"--trainer.logger.init_args.save_dir={tmp_path}"])  # fmt: skip
    said = capsys.readouterr().out
    assert code == 0
    bill = agent_on_years(run, (9,))[9]["tariff_cost"]
    assert "test on twin: episode return" in said and f"bill {bill:,.0f} PEN" in said
    assert "% of the rule-to-optimum gap on tariff" in said and "computed now on the twin" in said
