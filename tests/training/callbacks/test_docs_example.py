"""The usage example in docs/callbacks.md runs as written, with another project's LightningModule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iquitos_lightning.callbacks import StepRate

DOC = Path(__file__).resolve().parents[3] / "docs" / "callbacks.md"


def test_docs_example_runs_in_a_foreign_lightning_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    example = re.search(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert example is not None
    code = example.group(1)
    assert len(code.strip().splitlines()) <= 10
    monkeypatch.chdir(tmp_path)  # the Trainer writes its logs under the working directory
    namespace: dict[str, object] = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    trainer = namespace["trainer"]
    assert trainer.global_step == 100  # type: ignore[attr-defined]
    step_rate = next(callback for callback in trainer.callbacks if isinstance(callback, StepRate))  # type: ignore[attr-defined]
    assert step_rate.rates.batches_per_s > 0
    report = tmp_path / "lightning_logs" / "report"
    assert "fit report" in (report / "summary.md").read_text()
    assert (report / "learning_curve.png").stat().st_size > 5_000
