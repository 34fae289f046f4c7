"""The ``self_consumption`` layout (envs/self_consumption.py): hand numbers, numpy = torch, and on the tiny site the
import held at 0 by -1 while the battery can, and an idle battery at 0."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from iquitos_lightning.envs.actions import SELF_CONSUMPTION_WINDOW, SocketBands, fleet_power
from iquitos_lightning.envs.env_config import EnvConfig
from iquitos_lightning.envs.self_consumption import (
    check_idle_band,
    self_consumption_fleet_action,
    window_self_consumption_fleet_action,
)
from iquitos_lightning.envs.twin import make_twin
from iquitos_lightning.site.config import BatteryConfig

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"
BESS = BatteryConfig(capacity_kwh=400.0, power_kw=100.0)


def _bands(xp=np) -> SocketBands:
    # Two plugged sockets: minimums 1 and 2 kW, flexible room 3 and 1 kW; the first is the more urgent.
    array = torch.tensor if xp is torch else np.array
    return SocketBands(low=array([1.0, 2.0]), high=array([4.0, 3.0]), laxity_h=array([0.5, 2.0]))


@pytest.mark.parametrize(
    ("pv_kw", "mall_kw", "bess_action", "fraction"),
    [
        # load: net 400 + 3 - 350 = 53 kW; -1 covers it all, -0.5 half of it, 0 idles, +0.5 charges 50 kW
        (350.0, 400.0, -1.0, -53.0 / 100.0),
        (350.0, 400.0, -0.5, -26.5 / 100.0),
        (350.0, 400.0, 0.0, 0.0),
        (350.0, 400.0, 0.5, 0.5),
        # surplus: net 400 + 3 - 460 = -57 kW; -1 stores it all, -0.5 half of it, 0 idles (the surplus is exported)
        (460.0, 400.0, -1.0, 57.0 / 100.0),
        (460.0, 400.0, -0.5, 28.5 / 100.0),
        (460.0, 400.0, 0.0, 0.0),
        # a load above the battery's power: -1 discharges at its 100 kW
        (100.0, 400.0, -1.0, -1.0),
        (100.0, 400.0, 1.0, 1.0),
    ],
)
def test_the_bess_action_is_the_share_of_the_exchange_the_battery_takes_over(
    pv_kw: float, mall_kw: float, bess_action: float, fraction: float
) -> None:
    applied = self_consumption_fleet_action(np.array([bess_action, -1.0]), pv_kw, mall_kw, _bands(), BESS)
    assert applied[0] == pytest.approx(fraction, abs=1e-12)
    assert applied[1] == -1.0  # the fleet action passes through


def test_the_evs_power_counts_in_the_net_load() -> None:
    bands = _bands()
    assert float(fleet_power(1.0, bands).sum()) == pytest.approx(7.0)  # fleet +1: minimum 3 kW + room 4 kW
    applied = self_consumption_fleet_action(np.array([-1.0, 1.0]), 350.0, 400.0, bands, BESS)
    assert applied[0] == pytest.approx(-57.0 / 100.0, abs=1e-12)


def test_numpy_and_torch_give_the_same_bits() -> None:
    generator = np.random.default_rng(0)
    actions = generator.uniform(-1, 1, (64, 2))
    pv, mall = generator.uniform(0, 500, 64), generator.uniform(0, 800, 64)
    expected = np.stack(
        [self_consumption_fleet_action(actions[i], pv[i], mall[i], _bands(), BESS) for i in range(len(actions))]
    )
    bands = _bands(torch)
    batched = SocketBands(*(value.expand(64, 2) for value in (bands.low, bands.high, bands.laxity_h)))
    got = self_consumption_fleet_action(torch.tensor(actions), torch.tensor(pv), torch.tensor(mall), batched, BESS)
    np.testing.assert_array_equal(got.numpy(), expected)


def test_minus_one_holds_the_exchange_at_zero_while_the_battery_can_and_zero_idles(tmp_path: Path) -> None:
    """On the tiny site: with -1 the grid neither imports nor exports in every hour the battery is inside its power
    and SOC window; with 0 the battery never moves."""
    twin = make_twin(TINY, data_root=tmp_path, num_envs=2, record=True, layout=SELF_CONSUMPTION_WINDOW)
    action = torch.tensor([[-1.0, -1.0, -1.0, -1.0], [0.0, 0.0, 0.0, -1.0]], dtype=torch.float32)
    twin.reset()
    for _ in range(twin.hours):
        twin.step(TensorDict({"action": action}, batch_size=[2]))
    held, idle = twin.flows(0), twin.flows(1)
    bess = twin.site_config.bess
    bess_kw = held["bess_charge_kw"] - held["bess_discharge_kw"]
    free = (bess_kw.abs() < bess.power_kw - 1e-6) & held["bess_soc"].between(bess.soc_min + 0.01, bess.soc_max - 0.01)
    assert free.sum() > 10  # the test looks at real hours
    np.testing.assert_allclose(held["grid_import_kw"][free], 0.0, atol=1e-3)
    assert held["bess_charge_kw"].sum() > 0 and held["bess_discharge_kw"].sum() > 0  # both ways
    assert idle["bess_charge_kw"].abs().max() < 1e-9 and idle["bess_discharge_kw"].abs().max() < 1e-9


@pytest.mark.parametrize(
    ("bess_action", "fraction"),
    [
        # band 0.4 at a 53 kW load: within it the battery idles, beyond it (|a| - 0.4) / 0.6 of the unbanded map
        (-0.4, 0.0),
        (-0.39, 0.0),
        (0.3, 0.0),
        (-0.7, -26.5 / 100.0),  # half of the load, as -0.5 without a band
        (-1.0, -53.0 / 100.0),  # the ends keep their meaning
        (0.7, 0.5),
        (1.0, 1.0),
    ],
)
def test_an_idle_band_idles_near_zero_and_keeps_the_ends(bess_action: float, fraction: float) -> None:
    applied = self_consumption_fleet_action(np.array([bess_action, -1.0]), 350.0, 400.0, _bands(), BESS, 0.4)
    assert applied[0] == pytest.approx(fraction, abs=1e-12)
    assert applied[1] == -1.0


def test_the_idle_band_gives_the_same_bits_in_numpy_and_torch_and_none_is_the_plain_map() -> None:
    generator = np.random.default_rng(1)
    actions = generator.uniform(-1, 1, (64, 2))
    pv, mall = generator.uniform(0, 500, 64), generator.uniform(0, 800, 64)
    expected = _numpy_equals_torch(self_consumption_fleet_action, actions, pv, mall, 0.25)
    assert (np.abs(expected[:, 0]) < 1e-15).sum() > 5  # some actions fell in the band
    plain = [self_consumption_fleet_action(actions[i], pv[i], mall[i], _bands(), BESS) for i in range(64)]
    zero_band = [self_consumption_fleet_action(actions[i], pv[i], mall[i], _bands(), BESS, 0.0) for i in range(64)]
    np.testing.assert_array_equal(np.stack(zero_band), np.stack(plain))


@pytest.mark.parametrize("band", [-0.1, 1.0, 1.5])
def test_an_idle_band_outside_zero_to_one_is_refused(band: float) -> None:
    with pytest.raises(ValueError, match="idle_band must be in"):
        check_idle_band(band)


def test_an_idle_band_is_only_for_the_self_consumption_layout() -> None:
    with pytest.raises(ValueError, match="idle_band is for the self_consumption_window action layout, not 'fleet'"):
        EnvConfig(name="iquitos", layout="fleet", idle_band=0.2)
    assert EnvConfig(name="iquitos", layout=SELF_CONSUMPTION_WINDOW, idle_band=0.2).idle_band == 0.2


@pytest.mark.parametrize(
    ("pv_kw", "in_window", "applies"),
    [(460.0, False, 0), (460.0, True, 0), (350.0, True, 1), (350.0, False, 2)],  # surplus: net -57 kW; load: 53 kW
)
def test_the_window_layout_splits_the_hours_without_surplus_at_the_peak_window(
    pv_kw: float, in_window: bool, applies: int
) -> None:
    """Surplus hours take the first action in or out of the window; hours without surplus the second in the peak
    window and the third outside it; each is the self_consumption map of the action that applies."""
    action = np.array([-0.5, -1.0, 0.6, -1.0])
    for band in (0.0, 0.4):
        applied = window_self_consumption_fleet_action(action, pv_kw, 400.0, _bands(), BESS, in_window, band)
        plain = self_consumption_fleet_action(action[[applies, 3]], pv_kw, 400.0, _bands(), BESS, band)
        np.testing.assert_array_equal(applied, plain)
    by_hand = {0: 28.5 / 100.0, 1: -53.0 / 100.0, 2: 0.6}[applies]  # half the surplus stored / the load / 60 kW
    applied = window_self_consumption_fleet_action(action, pv_kw, 400.0, _bands(), BESS, in_window)
    assert applied[0] == pytest.approx(by_hand, abs=1e-12) and applied[1] == -1.0


def test_the_window_layout_gives_the_same_bits_in_numpy_and_torch() -> None:
    generator = np.random.default_rng(3)
    actions = generator.uniform(-1, 1, (64, 4))
    pv, mall = generator.uniform(0, 800, 64), generator.uniform(0, 800, 64)
    window = generator.uniform(size=64) < 0.5

    def layout_map(action, pv_kw, mall_kw, bands, bess, band):
        in_window = torch.tensor(window) if isinstance(action, torch.Tensor) else window[layout_map.row]
        layout_map.row += 1
        return window_self_consumption_fleet_action(action, pv_kw, mall_kw, bands, bess, in_window, band)

    layout_map.row = 0
    expected = _numpy_equals_torch(layout_map, actions, pv, mall, 0.3)
    without_surplus = mall + 3.0 > pv  # every hour's EVs take 3 kW at action -1 (the bands' minimums)
    in_window, outside = without_surplus & window, without_surplus & ~window
    assert in_window.sum() > 5 and outside.sum() > 5  # both of the hours without surplus are exercised
    assert not np.array_equal(expected[in_window], expected[outside])


def _numpy_equals_torch(layout_map, actions: np.ndarray, pv: np.ndarray, mall: np.ndarray, band: float) -> np.ndarray:
    """The map row by row in numpy and batched in torch, asserted equal to the bit; the numpy result."""
    rows = len(actions)
    expected = np.stack([layout_map(actions[i], pv[i], mall[i], _bands(), BESS, band) for i in range(rows)])
    bands = _bands(torch)
    batched = SocketBands(*(value.expand(rows, 2) for value in (bands.low, bands.high, bands.laxity_h)))
    got = layout_map(torch.tensor(actions), torch.tensor(pv), torch.tensor(mall), batched, BESS, band)
    np.testing.assert_array_equal(got.numpy(), expected)
    return expected
