"""What a comparison row knew and which years trained it: the columns that make rows comparable."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from iquitos_lightning.experiments.compare import (
    CompareError,
    RunOutcome,
    add_information_columns,
    best_of_restarts,
    plan_runs,
)
from iquitos_lightning.report.comparison import comparison_markdown

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "site" / "tiny.yaml"


def test_an_oracle_entry_is_the_profile_with_oracle_forecasts_and_rows_say_what_they_knew(tmp_path: Path) -> None:
    years = "model.init_args.env.training.train_site_seeds=[30,31]"
    specs = plan_runs(TINY, ["ppo", "ppo+oracle"], 1, 100, "per_socket_cpu", tmp_path, [f"ppo+oracle:{years}"])
    plain, oracle = specs
    assert plain.profile_path == oracle.profile_path  # the same profile...
    assert "--model.init_args.env.forecasts=oracle" in oracle.overrides  # ...with the true series ahead
    assert (plain.forecasts, plain.train_site_seeds) == ("past_days", None)
    assert (oracle.forecasts, oracle.train_site_seeds) == ("oracle", (30, 31))
    assert oracle.run_dir.name == "ppo+oracle-seed0"
    table = pd.DataFrame(
        {"objective_value": [1.0, 2.0, 3.0, 4.0], "seeds": [0, 0, 1, 1], "ev_served": [True] * 4},
        index=["rule_based", "mpc_forecast_thesis", "ppo", "ppo+oracle"],
    )
    add_information_columns(table, specs, evaluation_seed=7)
    assert table["information"].tolist() == ["the hour now", "past_days", "past_days", "oracle"]
    assert table["trained_on"].tolist() == ["-", "-", "7 (the evaluation year)", "30, 31"]
    assert table["starts_from"].tolist() == ["-", "-", "scratch", "scratch"]
    markdown = comparison_markdown(table)
    assert "| starts from | knew ahead | trained on (site seeds) |" in markdown
    assert "| ppo+oracle (1 seeds) | scratch | oracle | 30, 31 |" in markdown
    residual = plan_runs(TINY, ["sac"], 1, 100, "cpu", tmp_path, ["model.init_args.env.residual=shaver"])
    assert residual[0].starts_from == "prior: shaver"  # a row that starts from a hand-written controller
    assert residual[0].train_site_seeds == (2030, 2031, 2032, 2033)  # the card's SAC trains on other years
    with pytest.raises(CompareError, match="forecast kind"):
        plan_runs(TINY, ["ppo+tomorrow"], 1, 100, "cpu", tmp_path)


def test_a_hindsight_entry_is_the_profile_whose_critic_saw_the_truth_and_its_row_says_so(tmp_path: Path) -> None:
    twin = "model.init_args.env.backend.train=twin"
    plain, hindsight = plan_runs(TINY, ["ppo", "ppo+hindsight"], 1, 100, "per_socket_cpu", tmp_path, [twin])
    assert plain.profile_path == hindsight.profile_path
    assert "--model.init_args.env.training.critic_forecasts=oracle" in hindsight.overrides
    assert not any("env.forecasts=" in override for override in hindsight.overrides)  # the actor's forecasts stay
    assert (plain.forecasts, hindsight.forecasts) == ("past_days", "past_days (critic in training: oracle)")
    assert hindsight.run_dir.name == "ppo+hindsight-seed0"


def test_a_row_with_a_selection_year_reports_its_best_checkpoints_test_and_says_where_it_was_chosen(
    tmp_path: Path,
) -> None:
    chosen = "model.init_args.env.validation_site_seed=2034"
    # the card's profiles choose on 2034 since session 30: the plain row's override turns its selection year off
    unchosen = "ppo:model.init_args.env.validation_site_seed=null"
    plain, selecting = plan_runs(TINY, ["ppo", "sac"], 1, 100, "cpu", tmp_path, [f"sac:{chosen}", unchosen])
    assert "--final_test.backend=null" in plain.overrides and plain.selection_seed is None
    assert plain.report_json == plain.run_dir / "report" / "kpis.json"  # the fit's last evaluation
    # the later flags win: best.ckpt is tested on the simulator the evaluations ran on (the card's SAC: the twin)
    assert selecting.overrides[-2:] == ("--final_test.backend=twin", "--final_test.policy=best")
    assert (selecting.selection_seed, selecting.tested_on) == (2034, "twin")
    report = selecting.run_dir / "report" / "test-twin" / "kpis.json"
    assert selecting.report_json == report and not selecting.finished()
    report.parent.mkdir(parents=True)
    report.write_text('{"stage": "test", "frames_done": 40, "co2_kg": 1.0}')  # best.ckpt's frames, under budget
    assert selecting.finished()
    table = pd.DataFrame(
        {"objective_value": [1.0, 2.0], "seeds": [0, 0], "ev_served": [True, True]}, index=["ppo", "sac"]
    )
    add_information_columns(table, [plain, selecting], evaluation_seed=7)
    assert table.loc["sac", "trained_on"] == "2030, 2031, 2032, 2033; chosen on 2034"


def test_restarts_train_k_runs_per_seed_and_report_the_one_the_selection_year_scores_best(tmp_path: Path) -> None:
    chosen = "model.init_args.env.validation_site_seed=2034"
    specs = plan_runs(TINY, ["sac"], 2, 100, "cpu", tmp_path, [chosen], restarts=3)
    assert [spec.seed for spec in specs] == [0, 1, 2, 3, 4, 5]  # training seeds: the plain table's runs 0-5
    assert [spec.reported_seed for spec in specs] == [0, 0, 0, 1, 1, 1]
    # each run's evaluations with their selection-year scores (the fit's report/evaluations.csv)
    best_scores = {0: -5.0, 1: -3.0, 2: -4.0, 3: -1.0, 4: -6.0, 5: -2.0}
    for spec in specs:
        (spec.run_dir / "report").mkdir(parents=True)
        scores = [best_scores[spec.seed] - 1.0, best_scores[spec.seed], best_scores[spec.seed] - 0.5]
        evaluations = pd.DataFrame({"frames": [10, 20, 30], "selection_score": scores})
        evaluations.to_csv(spec.run_dir / "report" / "evaluations.csv", index=False)
    outcomes = [RunOutcome(spec, "trained", kpis={"seed": spec.seed}) for spec in specs]
    outcomes[3] = RunOutcome(specs[3], "failed")  # the best-scoring run of seed 1 failed: not reported
    assert [outcome.spec.seed for outcome in best_of_restarts(outcomes)] == [1, 5]
    table = pd.DataFrame({"objective_value": [1.0], "seeds": [2], "ev_served": [True]}, index=["sac"])
    add_information_columns(table, specs, evaluation_seed=7)
    assert table.loc["sac", "trained_on"] == "2030, 2031, 2032, 2033; chosen on 2034 among 3 runs"

    plain = plan_runs(TINY, ["sac"], 2, 100, "cpu", tmp_path, [chosen])
    assert [spec.reported_seed for spec in plain] == [0, 1]
    alone = [RunOutcome(spec, "trained", kpis={"seed": spec.seed}) for spec in plain]
    assert best_of_restarts(alone) == alone  # without restarts every finished run is a row
    with pytest.raises(CompareError, match="no selection year"):
        plan_runs(TINY, ["ppo"], 1, 100, "per_socket_cpu", tmp_path, [], restarts=2)
