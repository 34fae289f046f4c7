"""RLProgressBar: counts frames towards the budget and shows fps, ETA, last return and memory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from callbacks_testkit import TinyRegression, TinyRLModule, make_trainer
from rich.text import Text

from iquitos_lightning.agents import SAC, EnvConfig, RolloutConfig
from iquitos_lightning.callbacks import RLProgressBar, StepRate, VRAMMonitor
from iquitos_lightning.envs.env_config import Episodes
from iquitos_lightning.training.callbacks.progress import format_count, run_status


def test_bar_counts_frames_and_shows_rate_eta_return_and_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bar = RLProgressBar(leave=True)
    module = TinyRLModule(frame_budget=1_000, batch_size=8)
    callbacks = [StepRate(log_every_n_steps=5), VRAMMonitor(log_every_n_steps=5), bar]
    trainer = make_trainer(tmp_path, callbacks, max_steps=20, enable_progress_bar=True)
    trainer.fit(module)

    assert (bar.train_progress_bar.completed, bar.train_progress_bar.total) == (160, 1_000)
    shown = bar.get_metrics(trainer, module)
    assert list(shown)[:5] == ["frames", "fps", "ETA", "return", "mem"]
    assert shown["frames"] == "160/1k"
    assert shown["mem"].endswith("GB")
    assert shown["return"] == f"{module.last_episode_return:.4g}"
    assert "train/loss" in shown  # the module's own prog_bar metrics stay
    assert "frames: 160/1k" in capsys.readouterr().out
    # The bar's text as drawn (whatever the terminal width): the elapsed time and one ETA, the StepRate's; no
    # second remaining time from Lightning's time column (it said 0:33:07 beside ETA: 5:44:06 on a real run).
    drawn = [column.render(bar.train_progress_bar) for column in bar.progress.columns]
    line = " ".join(text.plain for text in drawn if isinstance(text, Text))
    assert f"ETA: {shown['ETA']}" in line
    assert len(re.findall(r"\d+:\d\d:\d\d", line)) == 2, line


def test_bar_on_a_real_agent_counts_its_frames_towards_its_budget_and_shows_its_return(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SAC on Pendulum, three 50-frame rollouts of one 50-step episode each: the bar reads the agent's own counters."""
    agent = SAC(
        env=EnvConfig(name="Pendulum-v1", episodes=Episodes(seed=3, max_steps=50)),
        rollout=RolloutConfig(frame_budget=150, frames_per_batch=50, eval_every_frames=150, eval_episodes=1),
        hidden_sizes=(16, 16),
        batch_size=16,
        init_random_frames=50,
    )
    bar = RLProgressBar(leave=True)
    callbacks = [StepRate(log_every_n_steps=1), VRAMMonitor(log_every_n_steps=1), bar]
    trainer = make_trainer(
        tmp_path, callbacks, max_steps=-1, max_epochs=-1, enable_progress_bar=True, log_every_n_steps=1
    )
    trainer.fit(agent)

    assert agent.frames_done == 150 and agent.episodes_done == 3
    assert (bar.train_progress_bar.completed, bar.train_progress_bar.total) == (150, 150)
    shown = bar.get_metrics(trainer, agent)
    assert list(shown)[:5] == ["frames", "fps", "ETA", "return", "mem"]
    assert shown["frames"] == "150/150"
    assert float(shown["fps"]) > 0
    assert shown["return"] == f"{agent.last_episode_return:.4g}" and agent.last_episode_return < 0  # Pendulum's cost
    assert "frames: 150/150" in capsys.readouterr().out
    assert re.fullmatch(r"Epoch \d+", bar.train_progress_bar.description.strip())  # Lightning: "Epoch 0/-2"


def test_bar_on_a_plain_module_keeps_lightning_behaviour(tmp_path: Path) -> None:
    bar = RLProgressBar()
    module = TinyRegression()
    trainer = make_trainer(tmp_path, [bar], max_steps=12, enable_progress_bar=True)
    trainer.fit(module)
    shown = bar.get_metrics(trainer, module)
    assert not {"frames", "fps", "ETA", "return", "mem"} & set(shown)
    assert bar.train_progress_bar.completed == 12 - 8  # batches of the second epoch (8 per epoch), not frames


def test_status_fields_are_short_and_skip_unknowns() -> None:
    assert run_status(12_345, 1_000_000, 412.5, 3723.0, -12.3456, "3.1/8.0 GB") == {
        "frames": "12.3k/1M",
        "fps": "412",
        "ETA": "1:02:03",
        "return": "-12.35",
        "mem": "3.1/8.0 GB",
    }
    assert run_status(None, None, None, None, None, None) == {}
    assert [format_count(value) for value in (999, 1_500, 2_500_000, 0.25)] == ["999", "1.5k", "2.5M", "0.25"]
