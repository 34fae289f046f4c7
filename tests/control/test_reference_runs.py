"""Reference runs are kept beside the site (control/reference_runs.py): the next process reads what the first ran,
other inputs or other code run them again, and a corrupt or unwritable cache costs only the run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iquitos_lightning.control import reference_runs
from iquitos_lightning.control.reference_runs import CACHE_FOLDER, cache_path, cached_reference
from iquitos_lightning.control.reference_tables import RunOptions, reference_tables, start_peaks
from iquitos_lightning.envs.env_config import Backend, EnvConfig, TrainingAids
from iquitos_lightning.envs.site_data import built_site, site_years

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


def test_years_run_together_give_each_years_peaks_run_alone(tmp_path: Path) -> None:
    """The peak shaver runs the years a twin lacks in one batched twin (control/reference_tables.py ``start_peaks``);
    each year's peaks must be its run alone, bit for bit, or a card profile would train on other start peaks."""
    options = {"demand_period": "month", "ev_guarantee": True, "forecasts": "past_days"}

    def peaks(data_root: Path, seeds: list[int]) -> list[np.ndarray]:
        schema = Path(built_site(TINY, data_root).schema_path)
        run_options = RunOptions(schema, objective="tariff", **options)
        return start_peaks(run_options, site_years(TINY, seeds, data_root))

    together = peaks(tmp_path / "together", [8, 9, 10])
    alone = [peaks(tmp_path / f"alone-{seed}", [seed])[0] for seed in (8, 9, 10)]
    assert all(np.array_equal(a, b) for a, b in zip(together, alone, strict=True))
    assert not np.array_equal(together[0], together[1])  # three years, three runs
    assert len(list((tmp_path / "together").rglob(f"{CACHE_FOLDER}/peaks-*.npy"))) == 3  # a file a year
