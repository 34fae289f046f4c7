"""The ``grid_target`` layout (envs/grid_target.py): hand numbers, numpy = torch, and a held import on the tiny site."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from iquitos_lightning.envs.actions import GRID_TARGET, SocketBands, fleet_power
from iquitos_lightning.envs.grid_target import grid_target_fleet_action, import_centre_kw, import_target_kw
from iquitos_lightning.envs.twin import make_twin
from iquitos_lightning.site.config import BatteryConfig

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"
BESS = BatteryConfig(capacity_kwh=400.0, power_kw=100.0)
MAX_IMPORT_KW = 1000.0
CENTRE_KW = 500.0  # the hand cases below: action -0.5 asks for 250 kW, -0.3 for 350 kW


def _bands(xp=np) -> SocketBands:
    # Two plugged sockets: minimums 1 and 2 kW, flexible room 3 and 1 kW; the first is the more urgent.
    array = torch.tensor if xp is torch else np.array
    return SocketBands(low=array([1.0, 2.0]), high=array([4.0, 3.0]), laxity_h=array([0.5, 2.0]))


@pytest.mark.parametrize(
    ("bess_action", "target_kw"), [(-1.0, 0.0), (-0.5, 200.0), (0.0, 400.0), (0.5, 700.0), (1.0, 1000.0)]
)  # fmt: skip
def test_the_bess_action_is_a_set_point_around_the_sites_centre_over_the_whole_range(
    bess_action: float, target_kw: float
) -> None:
    """[-1, 0] -> [0, centre] and [0, 1] -> [centre, max import], here with a centre of 400 kW of 1000."""
    assert import_target_kw(np.array(bess_action), 400.0, MAX_IMPORT_KW) == pytest.approx(target_kw, abs=1e-12)
    as_tensor = import_target_kw(torch.tensor(bess_action, dtype=torch.float64), 400.0, MAX_IMPORT_KW)
    assert float(as_tensor) == float(import_target_kw(np.array(bess_action), 400.0, MAX_IMPORT_KW))


def test_the_centre_is_the_mean_evening_net_load_of_the_site(tmp_path: Path) -> None:
    twin = make_twin(TINY, data_root=tmp_path, action_layout=GRID_TARGET)
    series, grid = twin.series, twin.site_config.grid
    evening = [t for t in range(series.hours) if grid.peak_start_hour <= t % 24 < grid.peak_end_hour]
    expected = sum(series.mall_kw[t] - series.pv_kw[t] for t in evening) / len(evening)
    assert twin.import_centre_kw == pytest.approx(expected, rel=1e-12)
    assert 0.0 < twin.import_centre_kw < 0.5 * twin.reward_scales.max_import_kw  # below the old centre
    assert import_centre_kw(series, 10.0) == 10.0  # kept inside the set-point range


def test_the_battery_moves_by_the_set_point_minus_the_net_load_within_its_power() -> None:
    bands = _bands()
    # Fleet action -1: every EV at its minimum, 3 kW; net load = 400 + 3 - 100 = 303 kW.
    cases = {
        # set-point 250 kW (a = -0.5): discharge 53 kW
        -0.5: -53.0 / 100.0,
        # set-point 350 kW (a = -0.3): charge 47 kW
        -0.3: 47.0 / 100.0,
        # set-point 0 (a = -1): discharge 303 kW, clipped at the battery's 100 kW
        -1.0: -1.0,
        # set-point 1000 kW (a = +1): charge 697 kW, clipped at 100 kW
        1.0: 1.0,
    }
    for bess_action, fraction in cases.items():
        applied = grid_target_fleet_action(
            np.array([bess_action, -1.0]), 100.0, 400.0, bands, BESS, MAX_IMPORT_KW, CENTRE_KW
        )
        assert applied[0] == pytest.approx(fraction, abs=1e-12), bess_action
        assert applied[1] == -1.0  # the fleet action passes through
    # The EVs' power counts in the net load: fleet +1 adds the 4 kW of room, so the discharge grows by 4 kW.
    applied = grid_target_fleet_action(np.array([-0.5, 1.0]), 100.0, 400.0, bands, BESS, MAX_IMPORT_KW, CENTRE_KW)
    assert float(fleet_power(1.0, bands).sum()) == pytest.approx(7.0)
    assert applied[0] == pytest.approx(-57.0 / 100.0, abs=1e-12)


def test_numpy_and_torch_give_the_same_bits() -> None:
    generator = np.random.default_rng(0)
    actions = generator.uniform(-1, 1, (64, 2))
    pv, mall = generator.uniform(0, 500, 64), generator.uniform(0, 800, 64)
    bands_np, bands_torch = _bands(), _bands(torch)
    expected = np.stack(
        [
            grid_target_fleet_action(actions[i], pv[i], mall[i], bands_np, BESS, MAX_IMPORT_KW, 321.5)
            for i in range(len(actions))
        ]
    )
    batched = SocketBands(*(value.expand(64, 2) for value in (bands_torch.low, bands_torch.high, bands_torch.laxity_h)))
    got = grid_target_fleet_action(
        torch.tensor(actions), torch.tensor(pv), torch.tensor(mall), batched, BESS, MAX_IMPORT_KW, 321.5
    )
    np.testing.assert_array_equal(got.numpy(), expected)


def test_a_constant_set_point_holds_the_import_flat_while_the_battery_can(tmp_path: Path) -> None:
    """On the tiny site: the import equals the set-point in every hour the battery is inside its power and SOC
    window, and the two ends of the action range charge and discharge the battery (it is not idle)."""
    twin = make_twin(TINY, data_root=tmp_path, num_envs=3, record=True, action_layout=GRID_TARGET)
    centre = twin.import_centre_kw
    target_kw = 0.5 * float(np.median(twin.series.mall_kw - twin.series.pv_kw))
    assert target_kw < centre
    bess_actions = torch.tensor([target_kw / centre - 1.0, -1.0, 1.0])
    action = torch.stack([bess_actions, torch.full((3,), -1.0)], -1).float()
    twin.reset()
    for _ in range(twin.hours):
        twin.step(TensorDict({"action": action}, batch_size=[3]))
    held = twin.flows(0)
    bess_kw = held["bess_charge_kw"] - held["bess_discharge_kw"]
    free = (bess_kw.abs() < twin.site_config.bess.power_kw - 1e-6) & held["bess_soc"].between(
        twin.site_config.bess.soc_min + 0.01, twin.site_config.bess.soc_max - 0.01
    )
    assert free.sum() > 10  # the test looks at real hours
    np.testing.assert_allclose(held["grid_import_kw"][free], target_kw, rtol=1e-4)
    assert twin.flows(1)["bess_discharge_kw"].sum() > 0 and twin.flows(2)["bess_charge_kw"].sum() > 0


def test_action_zero_discharges_on_evenings_above_the_average_and_charges_on_those_below(tmp_path: Path) -> None:
    """On the tiny site's week, the BESS action 0 (EVs at their minimum): the battery works both ways in the peak
    window. With the old centre, half the largest import (86 kW, above every evening net load of this site),
    it charged in every evening hour, so an untrained policy never discharged."""
    twin = make_twin(TINY, data_root=tmp_path, record=True, action_layout=GRID_TARGET, objective="tariff")
    twin.reset()
    action = TensorDict({"action": torch.tensor([[0.0, -1.0]])}, batch_size=[1])
    for _ in range(twin.hours):
        twin.step(action)
    flows = twin.flows(0)
    grid = twin.site_config.grid
    hour = np.arange(twin.hours) % 24
    evening = (hour >= grid.peak_start_hour) & (hour < grid.peak_end_hour)
    assert (flows["bess_discharge_kw"].to_numpy()[evening] > 1.0).sum() >= 5
    assert (flows["bess_charge_kw"].to_numpy()[evening] > 1.0).sum() >= 5
    net = twin.series.mall_kw - twin.series.pv_kw
    assert net[evening].max() < 0.5 * twin.reward_scales.max_import_kw  # the old centre was above them all
