"""Reference runs are kept beside the site (control/reference_runs.py): the next process reads what the first ran,
other inputs or other code run them again, and a corrupt or unwritable cache costs only the run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iquitos_lightning.control import reference_runs
from iquitos_lightning.control.reference_runs import CACHE_FOLDER, cache_path, cached_reference
from iquitos_lightning.control.reference_tables import reference_tables
from iquitos_lightning.envs.env_config import Backend, EnvConfig, TrainingAids

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"  # 7 days: 168 hours


def _as_a_new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reference_runs, "_IN_PROCESS", {})


def _start_peaks(data_root: Path, demand_period: str = "month") -> np.ndarray:
    """The start peaks a training twin of the tiny site reads (the peak shaver's run: control/reference_tables.py)."""
    config = EnvConfig(
        site=str(TINY),
        data_root=str(data_root),
        objective="tariff",
        demand_period=demand_period,
        backend=Backend(train="twin", num_envs=4),
        training=TrainingAids(start="staggered", episode_hours=24),
    )
    return reference_tables(config).start_peaks


def test_a_training_twins_start_peaks_are_read_back_by_the_next_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _start_peaks(tmp_path)
    assert len(list(tmp_path.rglob(f"{CACHE_FOLDER}/peaks-*.npy"))) == 1
    _as_a_new_process(monkeypatch)
    with monkeypatch.context() as patched:  # the peak shaver's year must not run again
        patched.setattr("iquitos_lightning.control.reference_tables.run_constant_action", lambda *a: pytest.fail("ran"))
        second = _start_peaks(tmp_path)
    assert np.array_equal(first, second) and first.any()
    daily = _start_peaks(tmp_path, demand_period="day")  # another input: its own run and file
    assert len(list(tmp_path.rglob(f"{CACHE_FOLDER}/peaks-*.npy"))) == 2
    assert not np.array_equal(daily, first)


def test_other_code_runs_the_reference_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    schema = tmp_path / "site" / "schema.json"
    runs = []
    first = cached_reference(schema, "peaks", "key", lambda: runs.append(1) or np.arange(3.0))
    _as_a_new_process(monkeypatch)
    assert np.array_equal(cached_reference(schema, "peaks", "key", lambda: pytest.fail("ran again")), first)
    _as_a_new_process(monkeypatch)
    before = cache_path(schema, "peaks", "key")
    monkeypatch.setattr(reference_runs, "code_digest", lambda: "a changed twin")
    assert cache_path(schema, "peaks", "key") != before
    cached_reference(schema, "peaks", "key", lambda: runs.append(2) or np.arange(3.0))
    assert runs == [1, 2]


def test_a_corrupt_or_unwritable_cache_costs_only_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    schema = tmp_path / "site" / "schema.json"
    cached_reference(schema, "rewards", "key", lambda: np.ones(4))
    cache_path(schema, "rewards", "key").write_bytes(b"cut short")
    _as_a_new_process(monkeypatch)
    assert np.array_equal(cached_reference(schema, "rewards", "key", lambda: np.full(4, 2.0)), np.full(4, 2.0))
    _as_a_new_process(monkeypatch)
    assert np.array_equal(cached_reference(schema, "rewards", "key", lambda: pytest.fail("ran again")), np.full(4, 2.0))
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("")
    values = cached_reference(a_file / "schema.json", "rewards", "key", lambda: np.zeros(2))  # nowhere to write
    assert np.array_equal(values, np.zeros(2))
