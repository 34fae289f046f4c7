"""PolicyEvaluation plays and logs an agent's evaluation episodes; a Trainer without it evaluates nothing and the agent
says so."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest

from iquitos_lightning.training.callbacks import PolicyEvaluation
from tests.agents.agents_testkit import small_sac


def bare_trainer(callbacks: list[pl.Callback]) -> pl.Trainer:
    return pl.Trainer(
        accelerator="cpu", max_epochs=-1, num_sanity_val_steps=0, logger=False, enable_progress_bar=False,
        enable_checkpointing=False, enable_model_summary=False, callbacks=callbacks,
    )  # fmt: skip


def test_the_evaluation_callback_logs_validation_and_test_episodes():
    agent = small_sac(100)
    evaluation = PolicyEvaluation()
    trainer = bare_trainer([evaluation])
    trainer.fit(agent)
    assert trainer.callback_metrics["val/episode_length"] == 50  # one 50-step Pendulum episode
    trainer.test(agent, verbose=False)
    assert "test/episode_return" in trainer.callback_metrics
    assert evaluation.test_kpi_row(agent) is None  # Pendulum is not the site: no KPI row
    assert evaluation.evaluation_flows() is None


def test_an_agent_evaluated_without_the_callback_warns_and_logs_nothing():
    agent = small_sac(100)
    trainer = bare_trainer([])
    with pytest.warns(UserWarning, match="no PolicyEvaluation"):
        trainer.fit(agent)
    assert not any(key.startswith("val/") for key in trainer.callback_metrics)
