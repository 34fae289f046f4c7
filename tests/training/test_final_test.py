"""``final_test``: a twin fit ends with a test of the policy on CityLearn (training/final_evaluation.py); with a
selection year, of the policy whose evaluation scored best on a year the run neither trains on nor reports
(``env.validation_site_seed``, ``final_test.policy: best``: agents/selection.py, training/callbacks/best_checkpoint.py).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
import torch

from iquitos_lightning.agents import RLAgent
from iquitos_lightning.cli import IquitosLightningCLI, run_lightning_cli
from iquitos_lightning.control.reference_results import REFERENCES_VERSION
from iquitos_lightning.envs.env_config import Backend, EnvConfig, TrainingAids
from iquitos_lightning.report import run_report
from iquitos_lightning.site.config import load_site_config
from iquitos_lightning.training.final_evaluation import FinalTest, gap_line, run_final_test

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "site" / "tiny.yaml"  # site seed 7: the evaluation year
SELECTION_SEED = 8
EVERY_56 = ["--model.init_args.rollout.frame_budget=336", "--model.init_args.rollout.eval_every_frames=56"]
TWIN_FLEET = [
    "--model.init_args.env.backend.train=twin",
    "--model.init_args.env.backend.num_envs=4",
    "--model.init_args.env.layout=fleet",
    "--model.init_args.env.objective=tariff",
    "--model.init_args.env.backend.evaluate=twin",
]


@pytest.fixture(autouse=True)
def bare_argv(monkeypatch):
    """LightningCLI reads ``args``; pytest's own argv would only make it warn."""
    monkeypatch.setattr(sys, "argv", sys.argv[:1])


def _fit(root: Path, *extra: str) -> int:
    """56 frames of the smoke profile: the tiny site's twin (fleet layout, tariff), evaluated on the twin at the end."""
    short = ["--model.init_args.rollout.frame_budget=56", "--model.init_args.rollout.eval_every_frames=56"]
    return run_lightning_cli(["fit", "--config", str(REPO / "configs" / "smoke.yaml"),
                              f"--trainer.logger.init_args.save_dir={root}", "--tracking.wandb=false",
                              *short, *TWIN_FLEET, *extra])  # fmt: skip


def test_a_twin_fit_ends_with_a_citylearn_year_that_bills_what_the_twin_evaluation_billed(
    tmp_path, capsys, monkeypatch
):
    drawn = []  # the curves each drawing call made (the real functions run)
    for name in ("plot_learning_curve", "plot_health"):
        draw = getattr(run_report, name)
        monkeypatch.setattr(run_report, name, lambda *args, _draw=draw, **kwargs: drawn.append(args[2].name)
                            or _draw(*args, **kwargs))  # fmt: skip
    assert _fit(tmp_path, "--final_test.backend=citylearn") == 0
    said = capsys.readouterr().out
    assert "testing the final policy on citylearn" in said and "final test on citylearn: episode return" in said
    run = tmp_path / "smoke"
    twin = json.loads((run / "report" / "kpis.json").read_text())  # the fit's last evaluation, on the twin
    citylearn = json.loads((run / "kpis.json").read_text())  # the test's row, on CityLearn
    assert twin["stage"] == "fit" and citylearn["frames_trained"] == 56
    assert (run / "report" / "test-citylearn" / "summary.md").read_text().startswith("# SAC: test report")
    assert "wall time of this fit" in (run / "report" / "summary.md").read_text()  # the fit's report is kept
    # The test adds no training row: its report holds the fit's curves, copied rather than drawn a second time.
    assert sorted(drawn) == ["health.png", "learning_curve.png"]
    for name in drawn:
        assert (run / "report" / "test-citylearn" / name).read_bytes() == (run / "report" / name).read_bytes(), name
    # the same weights on the bit-equal twin and on CityLearn: the same year (the twin's KPIs are float32 sums)
    assert citylearn["episode_return"] == pytest.approx(twin["episode_return"], rel=1e-6)
    for kpi in ("tariff_cost", "demand_charge", "ev_unmet_kwh", "grid_import_kwh"):
        assert citylearn[kpi] == pytest.approx(twin[kpi], rel=1e-5), kpi


def test_a_fit_stopped_before_its_budget_is_not_tested(tmp_path):
    """(Without ``final_test`` no fit tests: tests/test_first_hour.py finds no ``kpis.json`` after one.) A fit that
    ended short of its budget (Ctrl-C, SIGTERM) is resumed, not tested: here one that trained nothing yet."""
    cli = IquitosLightningCLI(RLAgent, subclass_mode_model=True, run=False, seed_everything_default=0,
                              args=["--config", str(REPO / "configs" / "smoke.yaml"),
                                    f"--trainer.logger.init_args.save_dir={tmp_path}", *TWIN_FLEET])  # fmt: skip
    assert cli.model.frames_done == 0 < cli.model.frame_budget
    assert not run_final_test(cli.trainer, cli.model, "citylearn")
    assert cli.model.env_config.backend.evaluate == "twin" and not (tmp_path / "smoke" / "kpis.json").exists()


def test_an_unknown_backend_is_refused():
    with pytest.raises(Exception, match="final_test.backend must be one of"):
        FinalTest(backend="gym")


def test_the_gap_line_reads_this_sites_references_and_only_those(tmp_path):
    folder = tmp_path / load_site_config(TINY).name
    folder.mkdir()
    tariff = {"rule_based": {"tariff_cost": 1000.0}, "optimum_tariff": {"tariff_cost": 600.0}}
    references = {"site_config_hash": load_site_config(TINY).content_hash(), "references_version": REFERENCES_VERSION,
                  "objectives": {"tariff": tariff}}  # fmt: skip
    (folder / "baselines.json").write_text(json.dumps(references))
    line = gap_line({"tariff_cost": 700.0}, TINY, "tariff", results=tmp_path)
    assert line is not None and line.startswith("75.0 % of the rule-to-optimum gap on tariff (rule-based bill 1,000")
    (folder / "baselines.json").write_text(json.dumps(references | {"site_config_hash": "another site"}))
    assert gap_line({"tariff_cost": 700.0}, TINY, "tariff", results=tmp_path) is None  # stale: no figure at all
    assert gap_line({"tariff_cost": 700.0}, TINY, "tariff", results=tmp_path / "none") is None


def _evaluations(run: Path) -> list[dict[str, float]]:
    with (run / "report" / "evaluations.csv").open() as rows:
        return [{key: float(value) for key, value in row.items() if value} for row in csv.DictReader(rows)]


@pytest.fixture(scope="module")
def selecting_run(selecting_tiny_run: Path) -> Path:
    """A 336-frame fit evaluated every 56 frames with a selection year, ending with the test of ``best.ckpt``
    (tests/conftest.py: ``_fit`` with ``EVERY_56``, selection year 8 and the final test of ``best`` on the twin)."""
    return selecting_tiny_run


def test_the_final_test_reports_the_policy_best_on_the_selection_year_as_the_evaluation_year_billed_it(
    selecting_run: Path,
) -> None:
    run = selecting_run
    evaluations = _evaluations(run)
    assert len(evaluations) == 6 and all("selection_score" in row for row in evaluations)
    best = max(evaluations, key=lambda row: row["selection_score"])  # the first of equal scores
    assert best["frames"] < 336  # the seed makes this a real choice: not the last policy
    saved = torch.load(run / "checkpoints" / "best.ckpt", weights_only=False)
    assert saved["rl_state"]["frames_done"] == best["frames"]
    # the policy without SAC's replay buffer (kept whole in last.ckpt, the resume point); it was tested all the same
    assert saved["rl_state"]["agent"]["replay_buffer"] is None
    last = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)
    assert last["rl_state"]["agent"]["replay_buffer"]["filled"] == 336
    # the selection year is another year: its bills are not the evaluation year's
    assert all(-row["selection_score"] != pytest.approx(row["tariff_cost"], rel=1e-3) for row in evaluations)
    tested = json.loads((run / "kpis.json").read_text())
    assert tested["frames_trained"] == best["frames"]
    # deterministic policy, same weights, same year: the test repeats that evaluation's bill (logged in float32)
    assert tested["tariff_cost"] == pytest.approx(best["tariff_cost"], rel=1e-6)
    assert tested["tariff_cost"] != pytest.approx(evaluations[-1]["tariff_cost"], rel=1e-6)  # not the final policy


def test_training_from_best_ckpt_without_its_buffer_is_refused_in_one_line(tmp_path, capsys, selecting_run: Path):
    best = selecting_run / "checkpoints" / "best.ckpt"
    assert _fit(tmp_path, f"--ckpt_path={best}", f"--model.init_args.env.validation_site_seed={SELECTION_SEED}") == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert said[-1].startswith("error: this checkpoint holds the policy without its replay buffer")
    assert "last.ckpt" in said[-1]


def test_without_a_selection_year_nothing_is_selected_training_is_the_same_and_best_is_refused(
    tmp_path, capsys, selecting_run: Path
):
    budget, at_the_end = EVERY_56[0], "--model.init_args.rollout.eval_every_frames=336"
    assert _fit(tmp_path, budget, at_the_end, "--report.plots=false") == 0  # one evaluation, of the evaluation year
    run = tmp_path / "smoke"
    assert not (run / "checkpoints" / "best.ckpt").exists()
    assert [set(row) & {"selection_score"} for row in _evaluations(run)] == [set()]
    # evaluating (two years, six times) runs under a forked RNG: the training is the same, weight for weight
    trained = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    selecting = torch.load(selecting_run / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    assert trained.keys() == selecting.keys()
    assert all(torch.equal(trained[name], selecting[name]) for name in trained)
    capsys.readouterr()
    assert _fit(tmp_path / "again", "--final_test.backend=twin", "--final_test.policy=best") == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert said[-1].startswith("error: final_test.policy best tests the best evaluation on a selection year")
    assert not (tmp_path / "again" / "smoke").exists()  # refused before anything was built


def test_a_selection_year_must_be_neither_trained_on_nor_the_reported_year():
    base = {"site": str(TINY), "backend": Backend(train="twin", evaluate="twin")}
    EnvConfig(**base, validation_site_seed=SELECTION_SEED, training=TrainingAids(train_site_seeds=[9, 10]))
    with pytest.raises(ValueError, match="also a training year"):
        EnvConfig(**base, validation_site_seed=9, training=TrainingAids(train_site_seeds=[9, 10]))
    with pytest.raises(ValueError, match="the site's own year"):
        EnvConfig(**base, validation_site_seed=7)
    with pytest.raises(ValueError, match="needs the Iquitos site"):
        EnvConfig(name="Pendulum-v1", validation_site_seed=SELECTION_SEED)
    with pytest.raises(Exception, match="final_test.policy must be one of"):
        FinalTest(backend="twin", policy="last")
