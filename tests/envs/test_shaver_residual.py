"""The ``shaver_residual`` layout (envs/shaver_prior.py): water-filling by hand, the shaver's hours, numpy = torch,
the window forecasts of the site tables, and what the zero action does on the tiny site."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from iquitos_lightning.control.tariff_rule import flat_level
from iquitos_lightning.envs.actions import SHAVER_RESIDUAL, SocketBands, fleet_power
from iquitos_lightning.envs.shaver_prior import add_shaver, flat_import_level, shaver_fleet_action
from iquitos_lightning.envs.site_tables import window_rest
from iquitos_lightning.envs.twin import make_twin
from iquitos_lightning.site.config import BatteryConfig

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"
# 400 kWh between 0 and 1 SOC, 100 kW, lossless: the energy available is (SOC - 0.2) x 400 kWh.
BESS = BatteryConfig(capacity_kwh=400.0, power_kw=100.0, round_trip_efficiency=1.0, soc_min=0.2)


def _bands(xp=np) -> SocketBands:
    # Two plugged sockets: minimums 1 and 2 kW, flexible room 3 and 1 kW; the first is the more urgent.
    array = torch.tensor if xp is torch else np.array
    return SocketBands(low=array([1.0, 2.0]), high=array([4.0, 3.0]), laxity_h=array([0.5, 2.0]))


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
    rest = np.array([250.0, 150.0, 0.0, 0.0])  # two later window hours: mall - PV 250 and 150 kW
    open_ = np.array([True, True, False, False])
    outside = shaver_fleet_action(50.0, 300.0, 3.0, 0.9, False, rest, open_, BESS)
    assert outside == 1.0
    # SOC 0.5: 120 kWh available. Loads: now 300 + 3 - 50 = 253; later 253 and 153 (this hour's 3 kW of EVs added).
    # Water-filling 120 kWh over [253, 253, 153]: level 193 (60 + 60 = 120), so this hour discharges 60 kW.
    inside = shaver_fleet_action(50.0, 300.0, 3.0, 0.5, True, rest, open_, BESS)
    assert inside == pytest.approx(-60.0 / 100.0, abs=1e-12)
    # Little net load now, more later: the battery waits (no charging inside the window).
    assert shaver_fleet_action(250.0, 300.0, 3.0, 0.5, True, rest, open_, BESS) == 0.0
    # A level far below the net load: the discharge stops at the battery's power.
    assert shaver_fleet_action(0.0, 900.0, 3.0, 1.0, True, rest * 0.0, open_, BESS) == -1.0


def test_the_agent_acts_around_the_shaver_and_the_fleet_starts_at_the_ev_minimum() -> None:
    bands = _bands()
    rest, open_ = np.array([250.0, 150.0, 0.0, 0.0]), np.array([True, True, False, False])
    zero = add_shaver(np.zeros(2), 50.0, 300.0, bands, 0.5, True, rest, open_, BESS)
    np.testing.assert_allclose(zero, [-0.6, -1.0], atol=1e-12)  # EVs at their 3 kW minimum: the case above
    # The prior's fleet action is -1, so the fleet residual's upper half spans the whole fleet range: +0.5 is fleet
    # action 0 (half the 4 kW of room: 5 kW), +1 is fleet action +1 (all of it: 7 kW); the loads grow by 2 and 4 kW.
    for residual, fleet, ev_kw in ((0.5, 0.0, 5.0), (1.0, 1.0, 7.0)):
        more_ev = add_shaver(np.array([0.0, residual]), 50.0, 300.0, bands, 0.5, True, rest, open_, BESS)
        assert float(fleet_power(fleet, bands).sum()) == pytest.approx(ev_kw)
        np.testing.assert_allclose(more_ev, [-0.6, fleet], atol=1e-12)  # all three loads up alike: the same 60 kW cut
    # The BESS residual maps around the shaver's -0.6: -0.7 goes 70 % of the way to -1 (-0.88), +0.5 half way to +1.
    for residual, bess in ((-0.7, -0.88), (0.5, 0.2), (-1.0, -1.0)):
        moved = add_shaver(np.array([residual, 0.0]), 50.0, 300.0, bands, 0.5, True, rest, open_, BESS)
        np.testing.assert_allclose(moved, [bess, -1.0], atol=1e-12)
    # Outside the window the shaver charges at +1: the residual's lower half reaches full discharge.
    outside = add_shaver(np.array([-0.5, 0.0]), 50.0, 300.0, bands, 0.5, False, rest, open_, BESS)
    np.testing.assert_allclose(outside, [0.0, -1.0], atol=1e-12)


def test_numpy_and_torch_give_the_same_bits() -> None:
    generator = np.random.default_rng(0)
    count = 64
    actions = generator.uniform(-1, 1, (count, 2))
    pv, mall, soc = generator.uniform(0, 500, count), generator.uniform(0, 800, count), generator.uniform(0, 1, count)
    inside = generator.uniform(size=count) < 0.7
    rest = generator.uniform(-100, 600, (count, 4))
    open_ = generator.uniform(size=(count, 4)) < 0.6
    bands_np, bands_torch = _bands(), _bands(torch)
    expected = np.stack(
        [
            add_shaver(actions[i], pv[i], mall[i], bands_np, soc[i], inside[i], rest[i], open_[i], BESS)
            for i in range(count)
        ]
    )
    batched = SocketBands(*(v.expand(count, 2) for v in (bands_torch.low, bands_torch.high, bands_torch.laxity_h)))
    tensors = [torch.tensor(v) for v in (actions, pv, mall)]
    got = add_shaver(*tensors, batched, torch.tensor(soc), torch.tensor(inside), torch.tensor(rest),
                     torch.tensor(open_), BESS)  # fmt: skip
    np.testing.assert_array_equal(got.numpy(), expected)


def test_the_window_forecasts_are_the_later_hours_of_the_same_window(tmp_path: Path) -> None:
    twin = make_twin(TINY, data_root=tmp_path)
    series, grid = twin.series, twin.site_config.grid
    rest, open_ = window_rest(series)  # past_days: the same hours of the days before (one, on the second day)
    width = grid.peak_end_hour - grid.peak_start_hour
    assert rest.shape == open_.shape == (series.hours, width - 1)
    net = series.mall_kw - series.pv_kw
    first = 24 + grid.peak_start_hour  # the second day's window opens
    np.testing.assert_array_equal(open_[first], True)
    np.testing.assert_allclose(rest[first], net[first + 1 - 24 : first + width - 24], rtol=1e-12)
    oracle, _ = window_rest(series, "oracle")  # the later hours themselves
    np.testing.assert_array_equal(oracle[first], net[first + 1 : first + width])
    last = first + width - 1  # its last hour: nothing later in the window
    assert not open_[last].any() and not rest[last].any()
    assert open_[last - 1].tolist() == [True] + [False] * (width - 2)
    assert not open_[first - 1].any()  # the hour before the window
    assert not open_[series.hours - 1].any()


def test_the_zero_action_holds_the_evening_import_below_the_uncontrolled_peaks(tmp_path: Path) -> None:
    """On the tiny site's twin, its week of the zero action (the shaver) against the BESS left idle in the
    ``fleet`` layout with EVs at their minimum: the window's monthly peaks fall, and outside it the BESS charges."""
    shaver = make_twin(TINY, data_root=tmp_path, record=True, layout=SHAVER_RESIDUAL, objective="tariff")
    idle = make_twin(TINY, data_root=tmp_path, record=True, layout="fleet", objective="tariff")
    hours = shaver.hours
    for env, action in ((shaver, [0.0, 0.0]), (idle, [0.0, -1.0])):
        env.reset()
        for _ in range(hours):
            env.step(TensorDict({"action": torch.tensor([action], dtype=torch.float32)}, batch_size=[1]))
    grid = shaver.site_config.grid
    flows = {name: env.flows(0) for name, env in (("shaver", shaver), ("idle", idle))}
    hour = np.arange(hours) % 24
    window = (hour >= grid.peak_start_hour) & (hour < grid.peak_end_hour)
    width = grid.peak_end_hour - grid.peak_start_hour
    daily_peak = {name: f["grid_import_kw"].to_numpy()[window].reshape(-1, width).max(1) for name, f in flows.items()}
    assert np.all(daily_peak["shaver"] <= daily_peak["idle"] + 1e-6)
    assert daily_peak["shaver"].mean() < daily_peak["idle"].mean() - 1.0
    charge = flows["shaver"]["bess_charge_kw"].to_numpy()
    assert charge[~window].sum() > 0 and charge[window].sum() == 0.0
