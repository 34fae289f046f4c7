"""The comparison: hand-computed aggregation, override scoping, and the command end to end on the tiny site."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from iquitos_lightning.__main__ import main
from iquitos_lightning.control.robust_mpc import load_settings
from iquitos_lightning.experiments.compare import (
    CompareError,
    made_with_the_tuned_mpc,
    overrides_for,
    parse_frames,
    plan_runs,
    profile_path,
)
from iquitos_lightning.profile.bases import profile_yaml
from iquitos_lightning.report.comparison import comparison_markdown, comparison_rows, gap_closed_pct

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "site" / "tiny.yaml"


def _kpis(co2: float, unmet: float, cost: float = 10.0, bill: float = 50.0, thesis: float = -7.0) -> dict[str, float]:
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
        "tariff_cost": bill,
        "thesis_return": thesis,
    }


def _references() -> dict[str, dict[str, float]]:
    return {
        "uncontrolled": _kpis(200, 1, bill=90, thesis=-9),
        "rule_based": _kpis(120, 1, bill=80, thesis=-6),
        "tariff_rule": _kpis(125, 1, bill=70, thesis=-6.5),
        "mpc_forecast_tariff": _kpis(130, 1, bill=75, thesis=-6.6),
        "mpc_perfect_tariff": _kpis(130, 1, bill=60, thesis=-6.6),
        "optimum_tariff": _kpis(130, 1, bill=60, thesis=-6.6),
        "mpc_forecast_thesis": _kpis(118, 1, bill=85, thesis=-5.8),
        "mpc_perfect_thesis": _kpis(117, 1, bill=84, thesis=-5.0),
        "optimum_thesis": _kpis(117, 1, bill=84, thesis=-5.0),
    }


def test_agents_are_mean_and_sample_std_over_seeds_and_gap_is_measured_on_the_objective():
    runs = {"sac": [_kpis(150, 1, bill=70), _kpis(130, 1.5, bill=66)], "ppo": [_kpis(90, 40, bill=50)]}
    table = comparison_rows(_references(), runs, unavoidable_unmet_kwh=1.0, objective="tariff")

    assert list(table.index[:6]) == [
        "uncontrolled", "rule_based", "tariff_rule", "mpc_forecast_tariff", "mpc_perfect_tariff", "optimum_tariff"
    ]  # fmt: skip
    assert table.loc["sac", "co2_t"] == pytest.approx(0.140)
    assert table.loc["sac", "objective_value"] == pytest.approx(68)  # the tariff bill
    assert table.loc["sac", "objective_value_std"] == pytest.approx(2.828427, rel=1e-6)  # sample std of 70 and 66
    assert table.loc["sac", "objective_gap_closed_pct"] == pytest.approx(60.0)  # (80 - 68) / (80 - 60)
    assert table.loc["tariff_rule", "objective_gap_closed_pct"] == pytest.approx(50.0)
    assert table.loc["uncontrolled", "objective_gap_closed_pct"] == pytest.approx(-50.0)
    assert table.loc["sac", "seeds"] == 2 and bool(table.loc["sac", "ev_served"])  # 1.5 <= 1 + 1 % of 100
    assert not bool(table.loc["ppo", "ev_served"])  # "beats" the optimum by leaving EVs empty: flagged
    assert gap_closed_pct(90, 100, 200) == pytest.approx(-10.0)
    markdown = comparison_markdown(table)
    assert "| sac (2 seeds) | 68 ± 3 | 60.0 ± 14.1 |" in markdown and "**NO**" in markdown


def test_on_the_thesis_objective_an_agent_is_scored_by_its_evaluation_return():
    runs = {"ppo_fleet": [{**_kpis(120, 1), "episode_return": -5.5}, {**_kpis(120, 1), "episode_return": -5.3}]}
    table = comparison_rows(_references(), runs, unavoidable_unmet_kwh=1.0, objective="thesis")

    assert "optimum_thesis" in table.index and "optimum_tariff" not in table.index
    assert table.loc["ppo_fleet", "objective_value"] == pytest.approx(-5.4)  # not the row's thesis_return key
    assert table.loc["ppo_fleet", "objective_gap_closed_pct"] == pytest.approx(60.0)  # (-5.4 + 6) / (-5 + 6)
    assert "| ppo_fleet (2 seeds) | -5.40 ± 0.14 |" in comparison_markdown(table)


def test_overrides_apply_to_all_agents_or_to_the_named_one():
    overrides = ["model.init_args.gamma=0.9", "ppo:model.init_args.epochs=2"]
    assert overrides_for("ppo", overrides) == {"model.init_args.gamma": "0.9", "model.init_args.epochs": "2"}
    assert overrides_for("ppo_fleet", overrides) == overrides_for("ppo", overrides)  # a variant takes its algorithm's
    assert overrides_for("ppo_fleet", ["ppo_fleet:model.init_args.lr=1"]) == {"model.init_args.lr": "1"}
    assert overrides_for("ppo", ["ppo_fleet:model.init_args.lr=1"]) == {}
    assert overrides_for("sac", overrides) == {"model.init_args.gamma": "0.9"}
    with pytest.raises(CompareError, match="dqn"):
        overrides_for("sac", ["dqn:model.init_args.lr=1"])
    with pytest.raises(CompareError, match="key=value"):
        overrides_for("sac", ["model.init_args.lr"])


def test_budget_rounds_up_to_whole_rollouts_and_bad_arguments_are_refused(tmp_path):
    fewer = ["ppo:" + "model.init_args.rollout.frames_per_batch=64"]
    specs = plan_runs(TINY, ["a2c", "ppo"], 2, 100, "per_socket_cpu", tmp_path, fewer)
    budgets = {(spec.agent, spec.seed): spec.frame_budget for spec in specs}
    assert budgets == {("a2c", 0): 120, ("a2c", 1): 120, ("ppo", 0): 128, ("ppo", 1): 128}  # a2c rollouts of 24
    assert specs[1].run_dir == tmp_path / "tiny" / "thesis" / "a2c-seed1"
    assert parse_frames("100", ["sac", "ppo"]) == {"sac": 100, "ppo": 100}
    assert parse_frames("sac=5,ppo=7,a2c=9", ["sac", "ppo"]) == {"sac": 5, "ppo": 7}
    with pytest.raises(CompareError, match="no budget for ppo"):
        parse_frames("sac=5", ["sac", "ppo"])
    # a variant trains on its entry's budget unless it has its own
    assert parse_frames("ppo=7", ["ppo", "ppo+oracle"]) == {"ppo": 7, "ppo+oracle": 7}
    assert parse_frames("ppo=7,ppo+oracle=9", ["ppo", "ppo+oracle"]) == {"ppo": 7, "ppo+oracle": 9}
    with pytest.raises(CompareError, match=r"no budget for sac\+oracle"):
        parse_frames("ppo=7", ["sac+oracle"])
    per_agent = plan_runs(TINY, ["a2c", "ppo"], 1, {"a2c": 30, "ppo": 3000}, "per_socket_cpu", tmp_path)
    assert [spec.frame_budget for spec in per_agent] == [48, 5840]  # ppo_per_socket_cpu rollouts are 2,920 frames
    card = plan_runs(TINY, ["a2c", "ppo"], 1, 100, "cpu", tmp_path)
    assert [spec.frame_budget for spec in card] == [1024, 8192]  # the card's twin profiles: rollouts of 1,024 and 8,192
    with pytest.raises(CompareError, match="unknown agent"):
        plan_runs(TINY, ["dqn"], 1, 100, "cpu", tmp_path)
    with pytest.raises(CompareError, match="no training profile"):
        plan_runs(TINY, ["sac"], 1, 100, "laptop", tmp_path)


def test_a_profile_is_found_in_configs_then_in_its_objectives_experiments_folder(tmp_path):
    configs = REPO / "configs"
    assert profile_path("sac", "cpu", configs) == configs / "sac_cpu.yaml"  # the card's profiles stay on top
    fleet = profile_path("sac_fleet", "tariff_twin_cpu", configs)
    assert fleet == configs / "experiments" / "tariff" / "sac_fleet_tariff_twin_cpu.yaml"
    assert profile_path("sac_fleet", "tariff_twin_cpu") == Path(
        "configs/experiments/tariff/sac_fleet_tariff_twin_cpu.yaml"
    )
    with pytest.raises(CompareError) as unknown:
        profile_path("sac_fleet", "laptop", configs)
    message = str(unknown.value)
    assert "\n" not in message and "no training profile sac_fleet_laptop.yaml" in message
    assert "tariff_twin_cpu" in message and "thesis_twin_cpu" in message  # what there is, wherever it lives
    for objective in ("tariff", "thesis"):  # the same name under two objectives: refused, not picked
        (tmp_path / "experiments" / objective).mkdir(parents=True)
        (tmp_path / "experiments" / objective / "ppo_x.yaml").write_text("{}")
    with pytest.raises(CompareError, match="in several folders"):
        profile_path("ppo", "x", tmp_path)
    (tmp_path / "ppo_x.yaml").write_text("{}")
    assert profile_path("ppo", "x", tmp_path) == tmp_path / "ppo_x.yaml"  # configs/ first


def test_every_experiment_profile_lives_under_its_objective_and_names_its_own_path():
    """``configs/experiments/<objective>/`` holds the experiments' profiles (``*_twin_cpu`` and the per-socket CityLearn
    ones), each under the objective it trains on (``thesis`` when unset), each with the ``fit --config`` line of its own
    path; none is left at the top, where only the card's profiles, the seeds' per-socket SAC and the smoke run are."""
    configs = REPO / "configs"
    card = {f"{agent}_{device}.yaml" for agent in ("sac", "ppo", "a2c") for device in ("cpu", "rtx4060", "auto")}
    assert {path.name for path in configs.glob("*.yaml")} == card | {"sac_per_socket_cpu.yaml", "smoke.yaml"}
    profiles = sorted((configs / "experiments").glob("*/*.yaml"))
    assert len(profiles) >= 18
    assert all(path.name.endswith(("_twin_cpu.yaml", "_per_socket_cpu.yaml")) for path in profiles)
    for path in profiles:
        env = profile_yaml(path)["model"]["init_args"]["env"]
        assert path.parent.name == env.get("objective", "thesis"), path
        relative = path.relative_to(REPO).as_posix()
        assert f"# python -m iquitos_lightning fit --config {relative}\n" in path.read_text(), path


@pytest.mark.slow
def test_compare_runs_end_to_end_on_the_tiny_site_and_keeps_finished_runs(tmp_path, capsys):
    """``compare`` in this process (``main``, what ``python -m iquitos_lightning`` runs); its runs are ``fit``
    subprocesses, as always."""
    command = [
        "compare", "--site", str(TINY), "--agents", "sac,ppo,a2c",
        "--seeds", "1", "--frames", "168", "--jobs", "2", "--profile", "per_socket_cpu",
        "--results", str(tmp_path / "results"), "--runs", str(tmp_path / "runs"),
        "--override", "ppo:model.init_args.rollout.frames_per_batch=168",
        "--override", "sac:model.init_args.rollout.frames_per_batch=168",
        "--override", "model.init_args.hidden_sizes=[16,16]",
        "--override", "report.plots=false",  # the runs' own images: the comparison draws its plots from their CSVs
        "--override", "sac:model.init_args.speed.compile=false",  # it compiles: tests/agents/test_speed.py
        # collection in this process: worker processes (5 here, each importing torch and CityLearn) are tested in
        # tests/agents; this test is the orchestration
        "--override", "sac:model.init_args.rollout.overlap=false",
        "--override", "ppo:model.init_args.env.backend.num_workers=1",
        "--override", "a2c:model.init_args.env.backend.num_workers=1",
    ]  # fmt: skip
    code = main(command)
    first = capsys.readouterr()
    assert code == 0, first.out[-3000:] + first.err[-3000:]
    out = tmp_path / "results" / "tiny"
    summary = json.loads((out / "comparison_thesis.json").read_text())
    references = {"uncontrolled", "rule_based", "tariff_rule", "mpc_forecast_thesis", "mpc_perfect_thesis"}
    assert set(summary["table"]) == references | {"optimum_thesis", "sac", "ppo", "a2c"}
    assert summary["command"].startswith("python -m iquitos_lightning compare --site")
    assert summary["seeds"] == [0] and {run["frame_budget"] for run in summary["runs"]} == {168}
    assert summary["git_revision"] != ""
    for agent in ("sac", "ppo", "a2c"):
        assert summary["per_run"][f"{agent}-seed0"]["frames_done"] == 168
        assert summary["table"][agent]["co2_t"] > 0
        assert len(summary["curves"][f"{agent}-seed0"]) == 1  # --evaluations 1: at the end of the budget
    for name in (
        "comparison_thesis.md",
        "comparison_thesis.csv",
        "learning_curves_thesis.png",
        "objective_co2_thesis.png",
    ):
        assert (out / name).stat().st_size > 500, name
    page = (out / "README.md").read_text()  # the site's results page, written by the commands themselves
    assert f"Made by `{summary['command']}`" in page and "[comparison_thesis.md](comparison_thesis.md)" in page
    assert "Made by `python -m iquitos_lightning baselines --site" in page  # compare made the references first

    code = main(command)
    second = capsys.readouterr()
    assert code == 0, second.err[-3000:]
    assert second.out.count(": kept") == 3 and "trained in" not in second.out
    assert "running `baselines` first" in first.out and "running `baselines` first" not in second.out


def test_a_reference_table_of_other_mpc_knobs_is_stale_for_the_comparison():
    """A re-tune of the practitioner's MPC (configs/tuned/) changes its row: a ``baselines.json`` made before it is
    made again by ``compare``, one made with today's knobs is kept."""
    tuned = asdict(load_settings())
    assert made_with_the_tuned_mpc({"mpc_robust_settings": tuned})
    assert not made_with_the_tuned_mpc({"mpc_robust_settings": {**tuned, "envelope_days": tuned["envelope_days"] + 1}})
    assert not made_with_the_tuned_mpc({})  # made before the file recorded its knobs


def test_test_years_are_refused_for_runs_without_a_selection_year_or_off_the_tariff(tmp_path):
    from iquitos_lightning.experiments.compare import run_compare
    from iquitos_lightning.experiments.launchers import LauncherOptions

    for profile in ("per_socket_cpu", "cpu"):  # the thesis objective; the card's SAC without its selection year
        overrides = [] if profile == "per_socket_cpu" else ["model.init_args.env.validation_site_seed=null"]
        with pytest.raises(CompareError, match="--test-years tests best.ckpt on the tariff objective"):
            run_compare(TINY, ["sac"], 1, 256, profile, tmp_path / "results", tmp_path / "runs", LauncherOptions(),
                        overrides, ["compare"], test_years=(9,))  # fmt: skip
    assert not (tmp_path / "results").exists()  # refused before the references are made
