"""``tune`` end to end on the tiny site: trials with pruning, a study interrupted mid-trial and resumed from the
trial's checkpoint, and the written best YAML trained as it is with ``fit``.

The search space makes pruning certain rather than likely: with the actor frozen (``actor_delay_frames`` beyond the
budget) a trial with ``zero_mean_start: true`` *is* the rule-based controller, one with ``false`` a random residual
on top of it, worse on the tariff bill at every evaluation. TPE's random start with ``--seed 1`` draws false, true in
the first sitting and false in the second (seeded 1 + 2 trials); with one startup trial, trial 2 is pruned at its
first evaluation.

Only the first sitting is a process of its own (it is what Ctrl-C stops with status 130); the second sitting and the
``fit`` of the tuned YAML run in this process (``main``, ``run_lightning_cli``: the same code a process runs, less
its ~10 s of imports). The trials are always ``fit`` subprocesses (the launcher starts them); they skip the
images of their report (``report.plots=false``), which nothing here reads.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iquitos_lightning.__main__ import main
from iquitos_lightning.cli import run_lightning_cli
from iquitos_lightning.experiments.study import open_storage

REPO = Path(__file__).resolve().parents[2]
TINY = str(REPO / "configs" / "site" / "tiny.yaml")
SPACE = """\
profile: configs/experiments/tariff/sac_residual_tariff_twin_cpu.yaml
params:
  model.init_args.zero_mean_start: {type: categorical, choices: [true, false]}
  model.init_args.residual_penalty: {type: float, low: 0.0, high: 10.0}
"""
TINY_TRIAL = [
    "model.init_args.env.backend.num_envs=2", "model.init_args.env.training.episode_hours=168",
    "model.init_args.rollout.frames_per_batch=56", "model.init_args.actor_delay_frames=1000000",
    "model.init_args.updates_per_frame=0.05", "model.init_args.hidden_sizes=[8,8]", "model.init_args.batch_size=16",
    "report.plots=false",
]  # fmt: skip


def _tune_arguments(tmp_path: Path) -> list[str]:
    """The ``tune`` command's arguments (after ``python -m iquitos_lightning``)."""
    search = tmp_path / "space.yaml"
    search.write_text(SPACE)
    command = [
        "tune", "--search", str(search), "--site", TINY,
        "--trials", "3", "--seed", "1", "--frames", "168", "--evaluations", "3", "--startup-trials", "1",
        "--final-eval", "none",
        "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "tuned"), "--results", str(tmp_path / "results"),
    ]  # fmt: skip
    for override in TINY_TRIAL:
        command += ["--override", override]
    return command


def _interrupt_during_second_trial(command: list[str], trial_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run ``tune`` and press Ctrl-C (SIGINT to its process group, as a terminal does) once the second trial has
    written its first checkpoint."""
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 240
    try:
        while not (trial_dir / "checkpoints" / "last.ckpt").exists():
            assert process.poll() is None, "tune ended before the second trial checkpointed"
            assert time.monotonic() < deadline, "the second trial wrote no checkpoint in 240 s"
            time.sleep(0.1)
        os.killpg(process.pid, signal.SIGINT)
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return subprocess.CompletedProcess(command, process.returncode, output, "")


@pytest.mark.slow
def test_tune_prunes_resumes_an_interrupted_study_and_writes_a_best_config_fit_can_train(tmp_path, capsys):
    # lazy: optuna only where the study is read back
    import optuna

    arguments = _tune_arguments(tmp_path)
    study_dir = tmp_path / "runs" / "space-tiny"
    first = _interrupt_during_second_trial([sys.executable, "-m", "iquitos_lightning", *arguments],
                                           study_dir / "trial-0001")  # fmt: skip
    assert first.returncode == 130, first.stdout[-3000:]
    assert "resume with the same command" in first.stdout
    storage = open_storage(str(study_dir / "study.journal"))
    states = [trial.state.name for trial in optuna.load_study(study_name="space-tiny", storage=storage).trials]
    assert states == ["COMPLETE", "RUNNING"]  # the interrupted trial waits for the next sitting

    capsys.readouterr()
    code = main(arguments)  # the same command again, in this process
    second = capsys.readouterr()
    assert code == 0, second.out[-3000:] + second.err[-3000:]
    assert "trial 1: resumed from an earlier sitting" in second.out
    trial_log = (study_dir / "trial-0001" / "compare.log").read_text()
    assert trial_log.count("$ ") == 2 and "--ckpt_path=" in trial_log.split("$ ")[2]  # continued from its checkpoint
    study = optuna.load_study(study_name="space-tiny", storage=open_storage(str(study_dir / "study.journal")))
    trials = study.trials
    assert [trial.state.name for trial in trials] == ["COMPLETE", "COMPLETE", "PRUNED"]
    assert [trial.params["zero_mean_start"] for trial in trials] == [False, True, False]
    assert study.best_trial.number == 1 and study.direction.name == "MINIMIZE"  # the rule's bill beats the noise
    assert max(trials[2].intermediate_values) == 56  # stopped at its first evaluation
    assert sorted(trials[1].intermediate_values) == [56, 112, 168]

    results = tmp_path / "results" / "tiny"
    table = (results / "tune_space-tiny.md").read_text()
    assert "| 2 | pruned |" in table and "best trial 1: tariff" in table
    for name in ("tune_space-tiny.csv", "tune_space-tiny_history.png", "tune_space-tiny_importances.png"):
        assert (results / name).stat().st_size > 200, name

    tuned = tmp_path / "tuned" / "space.yaml"
    assert "zero_mean_start: true" in tuned.read_text()
    code = run_lightning_cli(["fit", "--config", str(tuned), f"--trainer.logger.init_args.save_dir={tmp_path / 'fit'}",
                              f"--checkpoint.dirpath={tmp_path / 'fit' / 'ckpt'}", "--report.plots=false"])  # fmt: skip
    assert code == 0, capsys.readouterr().err[-3000:]
    kpis = json.loads((tmp_path / "fit" / "tuned-space-tiny" / "report" / "kpis.json").read_text())
    assert kpis["frames_done"] == 168 and kpis["tariff_cost"] == pytest.approx(study.best_value, rel=1e-6)
