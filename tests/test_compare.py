"""The comparison: hand-computed aggregation, override scoping, and the command end to end on the tiny site."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from iquitos_lightning.experiments.compare import CompareError, overrides_for, parse_frames, plan_runs
from iquitos_lightning.report.comparison import comparison_markdown, comparison_rows, gap_closed_pct

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "site" / "tiny.yaml"


def _kpis(co2: float, unmet: float, cost: float = 10.0) -> dict[str, float]:
    return {
        "grid_import_kwh": co2 / 0.5,
        "co2_kg": co2,
        "cost": cost,
        "peak_import_kw": 5.0,
        "pv_self_consumption_pct": 90.0,
        "ev_energy_served_kwh": 100.0,
        "ev_unmet_kwh": unmet,
        "departures_below_required": 0.0,
        "bess_equivalent_full_cycles": 1.0,
    }


def test_agents_are_mean_and_sample_std_over_seeds_and_gap_is_measured_against_the_optimum():
    references = {"uncontrolled": _kpis(200, 1), "rule_based": _kpis(120, 1), "optimum": _kpis(100, 1)}
    runs = {"sac": [_kpis(150, 1, cost=8), _kpis(130, 1.5, cost=12)], "ppo": [_kpis(90, 40)]}
    table = comparison_rows(references, runs, unavoidable_unmet_kwh=1.0)

    assert table.loc["sac", "co2_kg"] == pytest.approx(140)
    assert table.loc["sac", "co2_kg_std"] == pytest.approx(14.142135, rel=1e-6)  # sample std of 150 and 130
    assert table.loc["sac", "co2_gap_closed_pct"] == pytest.approx(60.0)  # (200 - 140) / (200 - 100)
    assert table.loc["rule_based", "co2_gap_closed_pct"] == pytest.approx(80.0)
    assert table.loc["sac", "seeds"] == 2 and bool(table.loc["sac", "ev_served"])  # 1.5 <= 1 + 1 % of 100
    assert not bool(table.loc["ppo", "ev_served"])  # "beats" the optimum by leaving EVs empty: flagged
    assert gap_closed_pct(90, 200, 100) == pytest.approx(110.0)
    markdown = comparison_markdown(table)
    assert "| sac (2 seeds) | 280 ± 28 | 140 ± 14 |" in markdown and "**NO**" in markdown


def test_overrides_apply_to_all_agents_or_to_the_named_one():
    overrides = ["model.init_args.gamma=0.9", "ppo:model.init_args.epochs=2"]
    assert overrides_for("ppo", overrides) == {"model.init_args.gamma": "0.9", "model.init_args.epochs": "2"}
    assert overrides_for("sac", overrides) == {"model.init_args.gamma": "0.9"}
    with pytest.raises(CompareError, match="dqn"):
        overrides_for("sac", ["dqn:model.init_args.lr=1"])
    with pytest.raises(CompareError, match="key=value"):
        overrides_for("sac", ["model.init_args.lr"])


def test_budget_rounds_up_to_whole_rollouts_and_bad_arguments_are_refused(tmp_path):
    specs = plan_runs(
        TINY, ["a2c", "ppo"], 2, 100, "cpu", tmp_path, ["ppo:" + "model.init_args.rollout.frames_per_batch=64"]
    )
    budgets = {(spec.agent, spec.seed): spec.frame_budget for spec in specs}
    assert budgets == {("a2c", 0): 120, ("a2c", 1): 120, ("ppo", 0): 128, ("ppo", 1): 128}  # a2c rollouts of 24
    assert specs[1].run_dir == tmp_path / "tiny" / "a2c-seed1"
    assert parse_frames("100", ["sac", "ppo"]) == {"sac": 100, "ppo": 100}
    assert parse_frames("sac=5,ppo=7,a2c=9", ["sac", "ppo"]) == {"sac": 5, "ppo": 7}
    with pytest.raises(CompareError, match="no budget for ppo"):
        parse_frames("sac=5", ["sac", "ppo"])
    per_agent = plan_runs(TINY, ["a2c", "ppo"], 1, {"a2c": 30, "ppo": 3000}, "cpu", tmp_path)
    assert [spec.frame_budget for spec in per_agent] == [48, 5840]  # ppo_cpu rollouts are 2,920 frames
    with pytest.raises(CompareError, match="unknown agent"):
        plan_runs(TINY, ["dqn"], 1, 100, "cpu", tmp_path)
    with pytest.raises(CompareError, match="no training profile"):
        plan_runs(TINY, ["sac"], 1, 100, "laptop", tmp_path)


@pytest.mark.slow
def test_compare_runs_end_to_end_on_the_tiny_site_and_keeps_finished_runs(tmp_path):
    command = [
        sys.executable, "-m", "iquitos_lightning", "compare", "--site", str(TINY), "--agents", "sac,ppo,a2c",
        "--seeds", "1", "--frames", "168", "--jobs", "2",
        "--results", str(tmp_path / "results"), "--runs", str(tmp_path / "runs"),
        "--override", "ppo:model.init_args.rollout.frames_per_batch=168",
        "--override", "sac:model.init_args.rollout.frames_per_batch=168",
        "--override", "model.init_args.hidden_sizes=[16,16]",
        "--override", "sac:model.init_args.speed.compile=false",  # sac_cpu compiles: tests/agents/test_speed.py
    ]  # fmt: skip
    first = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    out = tmp_path / "results" / "tiny"
    summary = json.loads((out / "comparison.json").read_text())
    assert set(summary["table"]) == {"uncontrolled", "rule_based", "optimum", "sac", "ppo", "a2c"}
    assert summary["command"].startswith("python -m iquitos_lightning compare --site")
    assert summary["seeds"] == [0] and {run["frame_budget"] for run in summary["runs"]} == {168}
    assert summary["git_revision"] != ""
    for agent in ("sac", "ppo", "a2c"):
        assert summary["per_run"][f"{agent}-seed0"]["frames_done"] == 168
        assert summary["table"][agent]["co2_kg"] > 0
    for name in ("comparison.md", "comparison.csv", "learning_curves.png", "co2_cost.png"):
        assert (out / name).stat().st_size > 500, name

    second = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout.count(": kept") == 3 and "trained in" not in second.stdout
