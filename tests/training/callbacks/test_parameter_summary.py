"""ParameterSummary: the module table and parameter totals, without Lightning's train/eval-mode and FLOPs lines."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from callbacks_testkit import TinyRegression, make_trainer
from lightning.pytorch.callbacks import ModelSummary

from iquitos_lightning.callbacks import ParameterSummary


def summary_text(tmp_path: Path, callback: ModelSummary, caplog: pytest.LogCaptureFixture) -> str:
    caplog.set_level(logging.INFO)
    trainer = make_trainer(tmp_path, [callback], max_steps=1, enable_model_summary=True)
    trainer.fit(TinyRegression())
    summaries = [record.getMessage() for record in caplog.records if "Trainable params" in record.getMessage()]
    assert len(summaries) == 1
    return summaries[0]


def test_the_summary_keeps_modules_and_parameters_and_drops_modes_and_flops(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lightnings = summary_text(tmp_path / "lightning", ModelSummary(), caplog)
    assert "Modules in eval mode" in lightnings and "Total Flops" in lightnings  # what this summary leaves out
    caplog.clear()
    ours = summary_text(tmp_path / "ours", ParameterSummary(), caplog)
    assert "Total params" in ours and "Trainable params" in ours and "Sequential" in ours
    assert "Modules in" not in ours and "flops" not in ours.lower() and "Mode" not in ours
