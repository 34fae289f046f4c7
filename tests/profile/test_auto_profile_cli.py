"""``fit --config configs/*_auto.yaml`` on this CPU machine: CPU settings chosen and printed, explicit settings win,
``--profile off`` leaves the config alone, and settings that cannot fit are refused at start with the numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from iquitos_lightning.agents import RLAgent
from iquitos_lightning.cli import IquitosLightningCLI, run_lightning_cli

REPO = Path(__file__).resolve().parents[2]
SAC_AUTO = str(REPO / "configs" / "sac_auto.yaml")
# The card's auto profile trains on the site's twin; these tests swap in Pendulum, resetting every site-only setting.
PENDULUM = [
    "--model.env",
    "{name: Pendulum-v1, episodes: {max_steps: 50}, layout: per_socket, objective: thesis, demand_period: month, "
    "validation_site_seed: null, backend: {train: citylearn, evaluate: citylearn, num_envs: 1}, "
    "training: {start: zero, episode_hours: null, train_site_seeds: null}}",
    "--final_test.backend",
    "null",
]

pytestmark = pytest.mark.cpu_only  # the choice on a CPU-only machine; on a GPU machine run with the GPU hidden


@pytest.fixture(autouse=True)
def bare_argv(monkeypatch):
    """LightningCLI reads ``args``; pytest's own argv would only make it warn."""
    monkeypatch.setattr(sys, "argv", sys.argv[:1])


def parsed(*args: str) -> IquitosLightningCLI:
    """The CLI with its classes built but nothing run (no subcommand)."""
    return IquitosLightningCLI(
        RLAgent, subclass_mode_model=True, run=False, seed_everything_default=0, args=["--config", SAC_AUTO, *args]
    )


def test_auto_profile_picks_the_cpu_settings_and_prints_why(capsys):
    cli = parsed(*PENDULUM)
    model = cli.model
    assert model.batch_size == 256  # written in the profile (a learning setting, as measured): the profile's value wins
    assert [layer.out_features for layer in model.actor.modules() if isinstance(layer, torch.nn.Linear)][:2] == [64, 64]
    assert model.buffer_config.capacity == 200_000 and model.buffer_config.storage == "memory"
    assert not model.speed_config.compile and not model.speed_config.cuda_graphs  # SAC eager: faster on a CPU
    assert model.speed_config.fused_adam
    assert cli.trainer.precision == "32-true"
    printed = capsys.readouterr().out
    assert "auto profile cpu for SAC" in printed and "model.buffer.capacity" in printed
    assert "auto would pick 128" in printed  # the written batch size is reported as the profile's, not chosen


def test_an_explicit_command_line_value_wins_and_the_printout_says_so(capsys):
    cli = parsed(*PENDULUM, "--model.batch_size", "128", "--model.hidden_sizes", "[32, 32]")
    assert cli.model.batch_size == 128
    assert [layer.out_features for layer in cli.model.actor.modules() if isinstance(layer, torch.nn.Linear)][:2] == [
        32,
        32,
    ]
    printed = capsys.readouterr().out
    assert "explicit: wins" in printed and "auto would pick [64, 64]" in printed
    assert "auto would pick 128" in printed  # written equal to the automatic value: still reported as the user's


def test_profile_off_uses_the_config_as_written(capsys):
    cli = parsed(*PENDULUM, "--profile", "off")
    assert cli.model.batch_size == 256  # SAC's own default: nothing chose for it
    assert "auto profile" not in capsys.readouterr().out


def test_settings_that_cannot_fit_are_refused_at_start_with_the_numbers(capsys):
    code = run_lightning_cli(["fit", "--config", SAC_AUTO, *PENDULUM, "--model.hidden_sizes", "[60000, 60000]"])
    assert code == 2
    error = capsys.readouterr().err
    assert "needs about" in error and "GiB" in error and "--model.hidden_sizes" in error


@pytest.mark.slow
def test_an_auto_profile_fit_runs_on_the_cpu(tmp_path, capsys):
    code = run_lightning_cli(
        [
            "fit",
            "--config",
            SAC_AUTO,
            *PENDULUM,
            "--model.rollout",
            "{frame_budget: 100, frames_per_batch: 50, eval_every_frames: 100, eval_episodes: 1}",
            "--model.init_random_frames",
            "50",
            "--trainer.logger.init_args.save_dir",
            str(tmp_path),
            "--checkpoint.dirpath",
            str(tmp_path / "checkpoints"),
            "--trainer.enable_progress_bar",
            "false",
            "--report.plots",
            "false",  # the run's images: tests/test_tracking_and_report.py
        ]
    )
    assert code == 0
    assert "auto profile cpu for SAC" in capsys.readouterr().out
    metrics = (tmp_path / "sac_auto" / "version_0" / "metrics.csv").read_text()
    assert "train/loss_qvalue" in metrics and "val/episode_return" in metrics
