"""The peak shaver (control/peak_shaver.py): water-filling by hand and as the tariff rule computes it, the shaver's
hours, numpy = torch, and what it does on the tiny site's twin."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from iquitos_lightning.control.peak_shaver import PeakShaver, flat_import_level
from iquitos_lightning.control.residual import with_residual
from iquitos_lightning.control.tariff_rule import flat_level
from iquitos_lightning.envs.actions import FLEET, SocketBands
from iquitos_lightning.envs.hour_context import HourContext
from iquitos_lightning.envs.site_data import built_site
from iquitos_lightning.envs.twin import IquitosTwin, make_twin
from iquitos_lightning.site.config import BatteryConfig
from tests.envs.test_site_years import CUT, changed_after

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"
# 400 kWh between 0 and 1 SOC, 100 kW, lossless: the energy available is (SOC - 0.2) x 400 kWh.
BESS = BatteryConfig(capacity_kwh=400.0, power_kw=100.0, round_trip_efficiency=1.0, soc_min=0.2)
REST = np.array([250.0, 150.0, 0.0, 0.0])  # two later window hours: mall - PV 250 and 150 kW
OPEN = np.array([True, True, False, False])


def _bands(xp=np) -> SocketBands:
    # Two plugged sockets: minimums 1 and 2 kW (3 kW at the shaver's fleet action -1), flexible room 3 and 1 kW.
    array = torch.tensor if xp is torch else np.array
    return SocketBands(low=array([1.0, 2.0]), high=array([4.0, 3.0]), laxity_h=array([0.5, 2.0]))


def _hour(pv, mall, soc, inside, rest=REST, open_=OPEN, bands=None) -> HourContext:
    bands = _bands() if bands is None else bands
    return HourContext(pv, mall, bands, soc, inside, rest, open_, BESS)


@pytest.mark.parametrize(
    ("loads", "energy", "level"),
    [
        ([3.0, 1.0, 2.0], 2.0, 1.5),  # cuts 3 -> 1.5 and 2 -> 1.5: 1.5 + 0.5 = 2
        ([3.0, 1.0, 2.0], 0.5, 2.5),  # only the top hour is cut
        ([3.0, 1.0, 2.0], 6.0, 0.0),  # the energy covers everything
        ([3.0, 1.0, 2.0], 0.0, 3.0),  # no energy: the level is the largest load
        ([4.0, -5.0, 4.0], 2.0, 3.0),  # a negative net load (export) counts as 0
    ],
)
def test_water_filling_by_hand_and_as_the_tariff_rule_computes_it(loads: list, energy: float, level: float) -> None:
    assert flat_import_level(np.array(loads), energy) == pytest.approx(level, abs=1e-12)
    assert float(flat_import_level(torch.tensor(loads, dtype=torch.float64), torch.tensor(energy))) == pytest.approx(
        level, abs=1e-12
    )
    assert flat_level(np.array(loads), energy) == pytest.approx(level, abs=1e-12)


def test_water_filling_numpy_equals_torch_bit_for_bit_and_the_tariff_rule() -> None:
    generator = np.random.default_rng(1)
    loads = generator.uniform(-200, 900, (256, 5))
    energy = generator.uniform(0, 2500, 256)
    ours = flat_import_level(loads, energy)
    np.testing.assert_array_equal(flat_import_level(torch.tensor(loads), torch.tensor(energy)).numpy(), ours)
    expected = np.array([flat_level(row, float(e)) for row, e in zip(loads, energy, strict=True)])
    np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-9)
    spent = np.clip(loads - ours[:, None], 0.0, None).sum(-1)  # the level spends the energy unless it covers all
    covered = energy >= np.clip(loads, 0.0, None).sum(-1)
    np.testing.assert_allclose(spent[~covered], energy[~covered], rtol=1e-9)
    assert np.all(ours[covered] == 0.0)


def test_the_shaver_charges_outside_the_window_and_holds_a_flat_level_inside() -> None:
    shaver = PeakShaver()
    np.testing.assert_array_equal(shaver.act(_hour(50.0, 300.0, 0.9, False)), [1.0, -1.0])  # EVs at their minimum
    # SOC 0.5: 120 kWh available. Loads: now 300 + 3 - 50 = 253; later 253 and 153 (this hour's 3 kW of EVs added).
    # Water-filling 120 kWh over [253, 253, 153]: level 193 (60 + 60 = 120), so this hour discharges 60 kW.
    np.testing.assert_allclose(shaver.act(_hour(50.0, 300.0, 0.5, True)), [-0.6, -1.0], atol=1e-12)
    # Little net load now, more later: the battery waits (no charging inside the window).
    assert shaver.act(_hour(250.0, 300.0, 0.5, True))[0] == 0.0
    # A level far below the net load: the discharge stops at the battery's power.
    assert shaver.act(_hour(0.0, 900.0, 1.0, True, rest=REST * 0.0))[0] == -1.0


def test_numpy_and_torch_give_the_same_bits() -> None:
    generator = np.random.default_rng(0)
    count = 64
    pv, mall, soc = generator.uniform(0, 500, count), generator.uniform(0, 800, count), generator.uniform(0, 1, count)
    inside = generator.uniform(size=count) < 0.7
    rest = generator.uniform(-100, 600, (count, 4))
    open_ = generator.uniform(size=(count, 4)) < 0.6
    shaver = PeakShaver()
    expected = np.stack(
        [shaver.act(_hour(float(pv[i]), mall[i], float(soc[i]), inside[i], rest[i], open_[i])) for i in range(count)]
    )
    bands = _bands(torch)
    batched = SocketBands(*(v.expand(count, 2) for v in (bands.low, bands.high, bands.laxity_h)))
    tensors = [torch.tensor(v) for v in (pv, mall, soc, inside, rest, open_)]
    got = shaver.act(HourContext(tensors[0], tensors[1], batched, tensors[2], *tensors[3:], BESS))
    np.testing.assert_array_equal(got.numpy(), expected)


def test_the_shaver_holds_the_evening_import_below_the_uncontrolled_peaks(tmp_path: Path) -> None:
    """On the tiny site's twin, its week (through the residual wrapper with the agent at 0, as the start peaks' run)
    against the BESS left idle in the ``fleet`` layout with EVs at their minimum: the window's daily peaks fall, and
    outside it the BESS charges."""
    shaver_twin = make_twin(TINY, data_root=tmp_path, record=True, layout=FLEET, objective="tariff")
    idle = make_twin(TINY, data_root=tmp_path, record=True, layout=FLEET, objective="tariff")
    hours = shaver_twin.hours
    for env, action in ((with_residual(shaver_twin, PeakShaver(), FLEET), [0.0, 0.0]), (idle, [0.0, -1.0])):
        env.reset()
        for _ in range(hours):
            env.step(TensorDict({"action": torch.tensor([action], dtype=torch.float32)}, batch_size=[1]))
    grid = shaver_twin.site_config.grid
    flows = {name: env.flows(0) for name, env in (("shaver", shaver_twin), ("idle", idle))}
    hour = np.arange(hours) % 24
    window = (hour >= grid.peak_start_hour) & (hour < grid.peak_end_hour)
    width = grid.peak_end_hour - grid.peak_start_hour
    daily_peak = {name: f["grid_import_kw"].to_numpy()[window].reshape(-1, width).max(1) for name, f in flows.items()}
    assert np.all(daily_peak["shaver"] <= daily_peak["idle"] + 1e-6)
    assert daily_peak["shaver"].mean() < daily_peak["idle"].mean() - 1.0
    charge = flows["shaver"]["bess_charge_kw"].to_numpy()
    assert charge[~window].sum() > 0 and charge[window].sum() == 0.0


def test_no_shaver_action_before_hour_t_depends_on_the_series_after_t_unless_oracle(tmp_path: Path) -> None:
    """The shaver plans the evening with the observation's forecasts: under ``past_days`` its run up to hour t (its
    actions show in the SOC, in the next observation) is the same whatever the series does after t."""
    build = built_site(TINY, tmp_path)
    changed = changed_after(build.series, CUT)
    seen = {}
    for forecasts in ("past_days", "oracle"):
        options = {"layout": FLEET, "objective": "tariff", "forecasts": forecasts}
        runs = []
        for years in ([], [changed]):  # the changed series as the only year; the true series sets the scales
            twin = IquitosTwin(build.schema_path, build.series, years=years, **options)
            env = with_residual(twin, PeakShaver(), FLEET)
            observed = [env.reset()["observation"][0]]
            for _ in range(CUT):
                step = env.step(TensorDict({"action": torch.zeros(1, 2)}, batch_size=[1]))
                observed.append(step["next", "observation"][0])
            runs.append(torch.stack(observed).numpy())
        seen[forecasts] = runs
    np.testing.assert_array_equal(*seen["past_days"])
    assert not np.array_equal(*seen["oracle"])  # the oracle's columns of later hours see the change
