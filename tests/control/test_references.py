"""The reference controllers' decisions on hand-made physical states."""

from __future__ import annotations

import numpy as np
import pytest
from control_testkit import hand_site_config

from iquitos_lightning.control.references import ReplayController, RuleBasedController, UncontrolledController
from iquitos_lightning.envs.state import SiteState


def _state(
    *,
    hour: int = 12,
    pv: float = 0.0,
    mall: float = 0.0,
    bess_soc: float = 0.5,
    connected: list[bool],
    soc: list[float],
    required: list[float],
    hours_left: list[int],
) -> SiteState:
    return SiteState(
        time_step=hour,
        hour_of_day=hour,
        bess_soc=bess_soc,
        pv_kw=pv,
        mall_kw=mall,
        price_per_kwh=0.28,
        socket_connected=np.array(connected),
        socket_soc=np.array(soc),
        socket_required_soc=np.array(required),
        socket_hours_to_departure=np.array(hours_left),
    )


def _config():
    # 3 sockets of 2 kW for 4 kWh EVs; BESS 10 kWh / 10 kW at eta 0.9, SOC window 0.2-1.0.
    config = hand_site_config(sockets=3, soc_min=0.2, initial_soc=0.5)
    config.grid.peak_start_hour, config.grid.peak_end_hour = 18, 23
    return config


def test_uncontrolled_charges_every_connected_socket_at_full_power_and_idles_the_bess() -> None:
    state = _state(connected=[True, False, True], soc=[0.2, 0, 0.9], required=[0.8, 0, 0.95], hours_left=[2, 0, 1])
    np.testing.assert_array_equal(UncontrolledController(_config()).act(state), [0.0, 1.0, 0.0, 1.0])


def test_rule_based_charges_ev_just_in_time_without_pv() -> None:
    """No PV surplus: each EV gets only what full power in its remaining hours could not deliver later."""
    state = _state(
        hour=10,
        pv=0.0,
        mall=5.0,
        connected=[True, True, True],
        soc=[0.2, 0.5, 0.2],
        required=[0.8, 0.6, 0.5],
        hours_left=[2, 1, 3],
    )
    controller = RuleBasedController(_config())
    # Socket 0: 2.4 kWh, 2 h -> 0.4 kW now. Socket 1: 0.4 kWh, last hour -> 0.4 kW.
    # Socket 2: 1.2 kWh with 3 h -> nothing yet. Off-peak, no surplus: the BESS idles.
    np.testing.assert_allclose(controller.ev_power_kw(state), [0.4, 0.4, 0.0], atol=1e-5)
    # Each is the EV guarantee's minimum: the bottom of its band, action -1.
    np.testing.assert_allclose(controller.act(state), [0.0, -1.0, -1.0, -1.0], atol=1e-5)


def test_rule_based_spends_pv_surplus_on_evs_first_then_the_bess() -> None:
    """7 kW PV over 2 kW mall = 5 kW surplus: EVs take what they can use this hour, the BESS the rest."""
    state = _state(
        hour=12,
        pv=7.0,
        mall=2.0,
        bess_soc=0.5,
        connected=[True, True, False],
        soc=[0.2, 0.7, 0.0],
        required=[0.8, 0.8, 0.0],
        hours_left=[3, 4, 0],
    )
    controller = RuleBasedController(_config())
    # EV 0 takes a full 2 kW, EV 1 its 0.4 kWh gap (the top of both bands); 2.6 kW remain for the BESS.
    np.testing.assert_allclose(controller.ev_power_kw(state), [2.0, 0.4, 0.0], atol=1e-5)
    np.testing.assert_allclose(controller.act(state), [0.26, 1.0, 1.0, -1.0], atol=1e-5)


def test_rule_based_bess_stops_at_its_soc_window() -> None:
    """The BESS can absorb only (1.0 - 0.95) x 10 kWh / 0.9 from the grid side before it is full."""
    state = _state(
        pv=9.0, mall=1.0, bess_soc=0.95, connected=[False] * 3, soc=[0] * 3, required=[0] * 3, hours_left=[0] * 3
    )
    assert RuleBasedController(_config()).act(state)[0] == pytest.approx(0.05 * 10 / 0.9 / 10)


def test_rule_based_discharges_the_bess_to_cover_net_load_only_in_the_peak_window() -> None:
    idle_sockets = dict(connected=[False] * 3, soc=[0] * 3, required=[0] * 3, hours_left=[0] * 3)
    controller = RuleBasedController(_config())
    # 19 h, 4 kW net load, SOC 0.5: 3 kWh x 0.9 = 2.7 kWh available above the 0.2 floor -> 2.7 kW.
    peak = controller.act(_state(hour=19, mall=4.0, bess_soc=0.5, **idle_sockets))
    assert peak[0] == pytest.approx(-0.27)
    # Same load at 15 h: off-peak, no surplus, the BESS holds its energy for the peak.
    assert controller.act(_state(hour=15, mall=4.0, bess_soc=0.5, **idle_sockets))[0] == 0.0
    # At the floor nothing is left to give.
    assert controller.act(_state(hour=19, mall=4.0, bess_soc=0.2, **idle_sockets))[0] == pytest.approx(0.0)


def test_replay_controller_returns_the_row_of_the_current_step() -> None:
    table = np.arange(12, dtype=float).reshape(3, 4) / 12
    state = _state(hour=2, connected=[False] * 3, soc=[0] * 3, required=[0] * 3, hours_left=[0] * 3)
    np.testing.assert_array_equal(ReplayController(table).act(state), table[2])
