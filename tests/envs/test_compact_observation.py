"""The compact observation (``env.observation: compact``, the fleet-level layouts' default) on the tiny site: its
names, its values worked by hand from the state, and what ``auto`` and ``full`` give. The twin shows the same
vector bit for bit: tests/envs/test_twin.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iquitos_lightning.envs.actions import SocketBands
from iquitos_lightning.envs.citylearn import IquitosEnv, make_iquitos_env
from iquitos_lightning.envs.fleet_features import FLEET_FEATURES, fleet_features
from iquitos_lightning.envs.site_tables import observation_names

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"
HOUR = 108  # day 4, 12 h: all four sockets plugged, leaving in 4, 2, 2 and 2 hours


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


def run_to(env: IquitosEnv, hour: int, action: list[float]) -> np.ndarray:
    observation, _ = env.reset()
    for _ in range(hour):
        observation, *_ = env.step(np.array(action, dtype=np.float32))
    return observation


def test_the_compact_names_are_the_exogenous_columns_the_net_load_the_bess_the_peak_and_the_fleet_sums() -> None:
    thesis = observation_names(128, "thesis", "compact")
    tariff = observation_names(128, "tariff", "compact")
    assert len(thesis) == 26 and len(tariff) == 70  # against 532 and 576 in full on the default site
    assert observation_names(4, "tariff", "compact") == tariff  # no column per socket
    assert thesis[18:] == ["net_load", "bess_soc", *FLEET_FEATURES]
    assert tariff[18] == "month_progress" and tariff[-9:-6] == ["net_load", "bess_soc", "month_peak_import"]
    assert "carbon_intensity" not in tariff and "carbon_intensity" in observation_names(128, "tariff", "full")
    assert len(set(tariff)) == len(tariff)
    with pytest.raises(ValueError, match="observation layout must be 'full' or 'compact', got 'auto'"):
        observation_names(4, "thesis", "auto")  # resolved first (site_tables.resolve_observation)


def test_the_fleet_sums_are_the_bands_of_the_plugged_evs_worked_by_hand(data_root: Path) -> None:
    env = make_iquitos_env(TINY, data_root=data_root, layout="fleet", objective="tariff")
    assert env.observation == "compact"  # auto, for a fleet-level layout
    observation = run_to(env, HOUR, [0.0, 0.0])  # BESS idle (the evenings import: a peak to date), EVs half way
    state, config = env.state(), env.site_config
    value = dict(zip(env.observation_names, observation.tolist(), strict=True))
    battery, charger = env.series.socket_battery_kwh, env.series.socket_charger_kw
    low = high = need = soon = weighted = 0.0
    for socket in range(env.sockets):  # one EV at a time, as docs/control.md states the band
        hours = int(state.socket_hours_to_departure[socket])
        ev_need = max(state.socket_required_soc[socket] - state.socket_soc[socket], 0.0) * battery[socket]
        ev_high = min(ev_need, charger[socket])
        ev_low = min(max(ev_need - (hours - 1) * charger[socket] + 1e-6, 0.0), ev_high) if ev_need > 0 else 0.0
        low, high, need = low + ev_low, high + ev_high, need + ev_need
        soon += ev_need if hours <= 2 else 0.0
        weighted += ev_need * hours
    fleet_kw = float(charger.sum())  # 3 x 2 + 3 = 9 kW
    assert state.socket_connected.all() and list(state.socket_hours_to_departure) == [4, 2, 2, 2]
    assert value["plugged_fraction"] == 1.0
    assert 0 < low < high < need and 0 < soon < need  # the hour is not a degenerate one
    assert value["ev_band_low"] == pytest.approx(low / fleet_kw, rel=1e-6)
    assert value["ev_band_high"] == pytest.approx(high / fleet_kw, rel=1e-6)
    assert value["ev_need"] == pytest.approx(need / fleet_kw, rel=1e-6)
    assert value["ev_need_leaving_2h"] == pytest.approx(soon / fleet_kw, rel=1e-6)
    assert value["ev_need_hours_to_departure"] == pytest.approx(weighted / need / config.ev.dwell_max_h, rel=1e-6)
    bess_kw = config.bess.power_kw
    assert value["net_load"] == pytest.approx((state.mall_kw - state.pv_kw) / bess_kw, rel=1e-6)
    assert value["bess_soc"] == pytest.approx(state.bess_soc, rel=1e-7)
    assert state.peak_to_date_kw > 0 and value["month_peak_import"] == pytest.approx(
        state.peak_to_date_kw / bess_kw, rel=1e-6
    )


def test_without_the_guarantee_the_band_is_every_plugged_chargers_power(data_root: Path) -> None:
    env = make_iquitos_env(TINY, data_root=data_root, layout="fleet", ev_guarantee=False)
    observation = run_to(env, HOUR, [0.0, 0.0])
    value = dict(zip(env.observation_names, observation.tolist(), strict=True))
    assert value["ev_band_low"] == 0.0
    assert value["ev_band_high"] == 1.0  # all four plugged: their chargers' power is the sockets' total


def test_the_fleet_sums_follow_what_the_evs_were_given(data_root: Path) -> None:
    """Same hour, EVs held at their minimum or charged at full power: the need left differs, the rest does not."""
    env = make_iquitos_env(TINY, data_root=data_root, layout="fleet")
    names = env.observation_names
    minimum, full = run_to(env, HOUR, [0.0, -1.0]), run_to(env, HOUR, [0.0, 1.0])
    fleet = slice(names.index("plugged_fraction"), None)
    assert minimum[fleet][3] > full[fleet][3]  # ev_need: more left after only the minimums
    np.testing.assert_array_equal(minimum[: names.index("bess_soc")], full[: names.index("bess_soc")])


def test_compact_keeps_every_column_of_the_full_vector_but_the_constant_and_the_sockets(data_root: Path) -> None:
    """``full`` with a fleet layout is the vector every layout showed before ``compact``: the per-socket one's."""
    options = {"data_root": data_root, "objective": "tariff"}
    compact = make_iquitos_env(TINY, layout="fleet", **options)
    full = make_iquitos_env(TINY, layout="fleet", observation="full", **options)
    per_socket = make_iquitos_env(TINY, **options)
    assert per_socket.observation == "full" and full.observation == "full"
    assert full.observation_names == per_socket.observation_names
    assert len(full.observation_names) == 64 + 4 * full.sockets
    np.testing.assert_array_equal(full.reset()[0], per_socket.reset()[0])
    compact_observation, full_observation = compact.reset()[0], full.reset()[0]
    for index, name in enumerate(compact.observation_names):
        if name in full.observation_names and name != "month_peak_import":  # the peak has another scale
            assert compact_observation[index] == full_observation[full.observation_names.index(name)], name
    carbon = full.tables.exogenous[:, full.observation_names.index("carbon_intensity")]
    assert carbon.min() == carbon.max()  # why compact leaves it out


def test_bad_observation_settings_are_one_line_errors(data_root: Path) -> None:
    with pytest.raises(ValueError, match=r"^env.observation must be one of \('auto', 'full', 'compact'\), got 'x'$"):
        make_iquitos_env(TINY, data_root=data_root, layout="fleet", observation="x")
    env = make_iquitos_env(TINY, data_root=data_root, layout="fleet")
    with pytest.raises(ValueError, match="the 'compact' observation has no per-socket features"):
        _ = env.tables.socket_offset
    hand_bands = SocketBands(low=np.zeros(2), high=np.ones(2), laxity_h=np.ones(2))  # no need_kwh
    with pytest.raises(ValueError, match="needs bands from socket_bands"):
        fleet_features(hand_bands, np.ones(2, bool), np.ones(2), 1.0, 1.0)


def test_the_fleet_sums_of_a_torch_batch_are_numpys_to_the_bit() -> None:
    """The twin (torch, [B, S]) and the CityLearn env (numpy, [S]) sum the same bands: random hours of 37 sockets."""
    torch = pytest.importorskip("torch")
    from iquitos_lightning.envs.actions import socket_bands

    rng = np.random.default_rng(0)
    envs, sockets = 16, 37
    connected = rng.random((envs, sockets)) < 0.7
    soc = np.where(connected, rng.uniform(0.05, 0.9, (envs, sockets)).astype(np.float32), 0.0)
    required = np.where(connected, rng.uniform(0.3, 1.0, (envs, sockets)), 0.0)
    hours = np.where(connected, rng.integers(1, 5, (envs, sockets)), 0)
    battery, charger = rng.choice([2.5, 4.5], sockets), rng.choice([2.0, 3.0], sockets)
    arrays = (connected, soc, required, hours, battery, charger)
    tensors = [torch.as_tensor(value) for value in arrays]
    tensors[3] = tensors[3].to(torch.float64)  # the twin keeps hours left as float64, the CityLearn env as int
    batched = fleet_features(socket_bands(*tensors), tensors[0], tensors[3], 90.0, 4.0).numpy()
    for env in range(envs):
        row = [value[env] for value in arrays[:4]]
        single = fleet_features(socket_bands(*row, battery, charger), connected[env], hours[env], 90.0, 4.0)
        np.testing.assert_array_equal(batched[env], single)
    assert batched[:, 0].min() > 0 and batched[:, 1].max() > 0 and batched[:, 5].max() > 0  # a real mix of hours
