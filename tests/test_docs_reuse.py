"""The examples of docs/reuse.md run as written: the agents train on a Gymnasium id, on a user's own env class and
with held gSDE exploration."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "reuse.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)


@pytest.mark.parametrize(("index", "frames"), [(0, 1_024), (1, 300), (2, 512)])
def test_docs_reuse_example_trains_its_agent_to_its_budget(tmp_path, monkeypatch, index: int, frames: int) -> None:
    assert len(EXAMPLES) == 3
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(EXAMPLES[index], f"{DOC}#example{index}", "exec"), namespace)
    agent = namespace["agent"]
    assert agent.frames_done == frames  # type: ignore[attr-defined]
    assert agent.updates_done > 0  # type: ignore[attr-defined]
    assert "val/episode_return" in namespace["trainer"].callback_metrics  # type: ignore[attr-defined]
