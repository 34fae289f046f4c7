"""What the agents may know of the coming hours, and the twin that trains on other years of the site.

The held-out-year protocol rests on two facts tested here on the tiny site: under the default ``past_days``
forecasts nothing an agent observes at hour t depends on the site's series after t (under ``oracle`` it
does), and a twin batching several years runs each env exactly as a one-year twin of that year would.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from iquitos_lightning.envs.actions import FLEET, PER_SOCKET
from iquitos_lightning.envs.env_config import Backend, EnvConfig, TrainingAids
from iquitos_lightning.envs.factory import make_env
from iquitos_lightning.envs.site_data import built_site, site_year, site_years
from iquitos_lightning.envs.twin import IquitosTwin
from iquitos_lightning.site.forecasts import forecast_table
from iquitos_lightning.site.series import SiteSeries

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"
CUT = 2 * 24 + 19  # the third evening's second window hour: every later value of the series is changed


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


def changed_after(series: SiteSeries, hour: int) -> SiteSeries:
    """``series`` with every PV and mall value after ``hour`` changed and the EV sessions arriving later dropped."""
    pv, mall = series.pv_kw.copy(), series.mall_kw.copy()
    pv[hour + 1 :] *= 0.3
    mall[hour + 1 :] = mall[hour + 1 :] * 1.4 + 7.0
    sessions = series.sessions[series.sessions["arrival_step"] <= hour].reset_index(drop=True)
    return dataclasses.replace(series, pv_kw=pv, mall_kw=mall, sessions=sessions)


def observations(twin: IquitosTwin, steps: int, seed: int = 0) -> np.ndarray:
    """[steps + 1, O]: the observations of one env under a seeded random action sequence."""
    generator = torch.Generator().manual_seed(seed)
    seen = [twin.reset()["observation"][0].clone()]
    for _ in range(steps):
        action = torch.rand(1, twin.action_size, generator=generator) * 2 - 1
        seen.append(twin.step(TensorDict({"action": action}, batch_size=[1]))["next", "observation"][0].clone())
    return torch.stack(seen).numpy()


def test_past_days_forecasts_are_the_mean_of_the_same_hours_before() -> None:
    values = np.arange(24 * 5, dtype=float) ** 1.5
    table = forecast_table(values, [1, 5, 24])
    t = 24 * 4 + 3
    for column, ahead in enumerate((1, 5, 24)):
        assert table[t, column] == pytest.approx(np.mean([values[t + ahead - 24 * d] for d in (1, 2, 3)]))
    assert table[30, 0] == pytest.approx(values[7])  # one day known: that day's hour
    assert table[2, 0] == values[2]  # no day known: the value now
    np.testing.assert_array_equal(forecast_table(values, [1, 5], "oracle")[t], values[[t + 1, t + 5]])
    with pytest.raises(ValueError, match="env.forecasts"):
        forecast_table(values, [1], "tomorrow")


@pytest.mark.parametrize(("layout", "objective"), [(FLEET, "tariff"), (PER_SOCKET, "thesis")])
def test_no_observation_before_hour_t_depends_on_the_series_after_t_unless_oracle(
    data_root: Path, layout: str, objective: str
) -> None:
    build = built_site(TINY, data_root)
    changed = changed_after(build.series, CUT)
    seen = {}
    for forecasts in ("past_days", "oracle"):
        options = {"layout": layout, "objective": objective, "forecasts": forecasts}
        true = IquitosTwin(build.schema_path, build.series, **options)
        # the changed series as the only training year; the true series sets the scales (constants of the site)
        other = IquitosTwin(build.schema_path, build.series, years=[changed], **options)
        seen[forecasts] = observations(true, CUT), observations(other, CUT)
    np.testing.assert_array_equal(*seen["past_days"])
    assert not np.array_equal(*seen["oracle"])  # the oracle's columns of later hours see the change


def test_a_twin_of_several_years_runs_each_env_as_the_one_year_twin_of_its_year(data_root: Path) -> None:
    build = built_site(TINY, data_root)
    years = site_years(TINY, [101, 102], data_root)
    assert site_year(TINY, 101).name == "tiny-seed101" and not np.array_equal(years[0].mall_kw, years[1].mall_kw)
    options = {"layout": FLEET, "objective": "tariff", "start": "staggered", "episode_hours": 30}
    batch = IquitosTwin(build.schema_path, build.series, num_envs=4, years=years, **options)
    generator = torch.Generator().manual_seed(3)
    actions = torch.rand(40, 4, batch.action_size, generator=generator) * 2 - 1
    batched = [batch.reset()["observation"]]
    for action in actions:
        out = batch.step(TensorDict({"action": action}, batch_size=[4]))
        batched.append(out["next", "observation"])
        if out["next", "done"].any():
            batched[-1] = batch.reset(TensorDict({"_reset": out["next", "done"]}, batch_size=[4]))["observation"]
    batched = torch.stack(batched)
    for env in (1, 2):  # env b runs year b % 2 from the staggered start b x T / 4
        alone = IquitosTwin(build.schema_path, build.series, num_envs=4, years=[years[env % 2]], **options)
        single = [alone.reset()["observation"][env]]
        for action in actions:
            out = alone.step(TensorDict({"action": action}, batch_size=[4]))
            single.append(out["next", "observation"][env])
            if out["next", "done"].any():
                single[-1] = alone.reset(TensorDict({"_reset": out["next", "done"]}, batch_size=[4]))["observation"][
                    env
                ]
        np.testing.assert_array_equal(batched[:, env].numpy(), torch.stack(single).numpy())
    assert not torch.equal(batched[:, 1], batched[:, 2])  # other years, other observations


def test_the_training_env_trains_on_the_listed_years_and_refuses_them_elsewhere(data_root: Path) -> None:
    config = EnvConfig(
        site=str(TINY),
        layout=FLEET,
        backend=Backend(train="twin", num_envs=2, data_root=str(data_root)),
        training=TrainingAids(train_site_seeds=[101]),
    )
    env = make_env(config)
    assert [year.config.seed for year in env.years] == [101]
    assert env.series.config.seed == 7  # the site's own year sets the scales; evaluation runs it
    with pytest.raises(ValueError, match="train_site_seeds"):
        EnvConfig(
            site=str(TINY), training=TrainingAids(train_site_seeds=[101])
        )  # CityLearn trains on the site's own year
    years = site_years(TINY, [101, 102], data_root)  # a recording twin of two years: each env's flows (reference
    recording = IquitosTwin(built_site(TINY, data_root).schema_path, env.series, num_envs=2, years=years, record=True)
    recording.rollout(3)  # runs' grid imports), but the departures table reads one year's sessions
    assert [len(recording.flows(index)) for index in (0, 1)] == [3, 3]
    assert not recording.flows(0).equals(recording.flows(1))
    with pytest.raises(RuntimeError, match="one year"):
        recording.departures(1)


def test_training_on_the_reported_year_is_refused(data_root: Path) -> None:
    """The site's own seed is the year every evaluation and table reports: training on it is refused, alone or
    among other years, in one line that names it."""
    for years in ([7], [101, 7]):
        with pytest.raises(ValueError, match="train_site_seeds includes 7, the site's own year"):
            EnvConfig(
                site=str(TINY),
                layout=FLEET,
                backend=Backend(train="twin", data_root=str(data_root)),
                training=TrainingAids(train_site_seeds=years),
            )
    EnvConfig(
        site=str(TINY),
        layout=FLEET,
        backend=Backend(train="twin", data_root=str(data_root)),
        training=TrainingAids(train_site_seeds=[101, 102]),
    )
