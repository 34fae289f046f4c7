"""Reference runs are kept beside the site (control/reference_runs.py): the next process reads what the first ran,
other inputs or other code run them again, and a corrupt or unwritable cache costs only the run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from iquitos_lightning.control import reference_runs
from iquitos_lightning.control.peak_shaver import PeakShaver
from iquitos_lightning.control.reference_runs import CACHE_FOLDER, cache_path, cached_reference
from iquitos_lightning.control.residual import with_residual
from iquitos_lightning.control.training_references import RunOptions, reference_tables, start_peaks
from iquitos_lightning.envs.actions import FLEET
from iquitos_lightning.envs.env_config import Backend, EnvConfig, TrainingAids
from iquitos_lightning.envs.site_data import built_site, site_years
from iquitos_lightning.envs.twin import IquitosTwin

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"  # 7 days: 168 hours


def _as_a_new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reference_runs, "_IN_PROCESS", {})


def _start_peaks(data_root: Path, demand_period: str = "month") -> np.ndarray:
    """The start peaks a training twin of the tiny site reads (the peak shaver's run:
    control/training_references.py)."""
    config = EnvConfig(
        site=str(TINY),
        objective="tariff",
        demand_period=demand_period,
        backend=Backend(train="twin", num_envs=4, data_root=str(data_root)),
        training=TrainingAids(start="staggered", episode_hours=24),
    )
    return reference_tables(config).start_peaks


def test_a_training_twins_start_peaks_are_read_back_by_the_next_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _start_peaks(tmp_path)
    assert len(list(tmp_path.rglob(f"{CACHE_FOLDER}/peaks-*.npy"))) == 2  # the run's month and day peaks
    _as_a_new_process(monkeypatch)
    with monkeypatch.context() as patched:  # the peak shaver's year must not run again, for either period
        patched.setattr(
            "iquitos_lightning.control.training_references.run_constant_action", lambda *a: pytest.fail("ran")
        )
        second = _start_peaks(tmp_path)
        daily = _start_peaks(tmp_path, demand_period="day")
    assert np.array_equal(first, second) and first.any()
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
    """The peak shaver runs the years a twin lacks in one batched twin (control/training_references.py ``start_peaks``);
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
    assert len(list((tmp_path / "together").rglob(f"{CACHE_FOLDER}/peaks-*.npy"))) == 6  # a file a year and period


@pytest.mark.parametrize("demand_period", ["month", "day"])
def test_one_run_gives_each_periods_peaks_as_a_twin_billed_by_that_period_reads_them(
    tmp_path: Path, demand_period: str
) -> None:
    """Both periods' start peaks come from one run of the shaver (its actions never read the billed peak), each by
    the twin's recurrence over the run's grid imports: they must be the peak-to-date a twin billed by that period
    shows before every step of the same run, bit for bit."""
    data_root = tmp_path / "data"
    schema = Path(built_site(TINY, data_root).schema_path)
    years = site_years(TINY, [8, 9], data_root)
    options = RunOptions(schema, ev_guarantee=True, objective="tariff", demand_period=demand_period,
                         forecasts="past_days")  # fmt: skip
    twin = IquitosTwin(schema, years[0], num_envs=2, years=years, layout=FLEET, ev_guarantee=True,
                       objective="tariff", demand_period=demand_period)  # fmt: skip
    env = with_residual(twin, PeakShaver(), FLEET)
    env.reset()
    read = np.empty((2, twin.hours))
    for step in range(twin.hours):
        read[:, step] = twin.peak_to_date_kw.numpy()
        env.step(TensorDict({"action": torch.zeros(2, 2)}, batch_size=[2]))
    derived = start_peaks(options, years)
    assert all(np.array_equal(derived[year], read[year]) for year in range(2)) and read.any()
    other = start_peaks(replace(options, demand_period="day" if demand_period == "month" else "month"), years)
    assert not any(np.array_equal(derived[year], other[year]) for year in range(2))  # read back, not run again
    assert len(list(data_root.rglob(f"{CACHE_FOLDER}/peaks-*.npy"))) == 4  # both periods of both years, one run
