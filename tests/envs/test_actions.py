"""Action semantics and the EV guarantee (envs/actions.py) by hand-worked numbers, and numpy = torch to the bit.

Fast on purpose (numpy and torch only, no env): it is the first file of the `actions` mutation target
(scripts/mutation.sh); the whole-episode checks on the tiny site are in test_actions_episodes.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iquitos_lightning.envs.actions import (
    FLEET,
    GUARANTEE_MARGIN_KWH,
    LAYOUTS,
    PER_SOCKET,
    SELF_CONSUMPTION_WINDOW,
    action_count,
    around_prior,
    fleet_power,
    per_socket_power,
    piecewise_affine,
    power_to_action,
    power_to_fleet_action,
    socket_bands,
    socket_power,
)


def _hand_bands(xp=np):
    # 4 sockets of 2 kW, 4 kWh EVs: need 2.4 kWh in 2 h, 0.4 kWh on its last hour, 1.2 kWh in 3 h, unplugged.
    array = (lambda values, dtype=None: torch.tensor(values, dtype=dtype or torch.float64)) if xp is torch else np.array
    return socket_bands(
        array([True, True, True, False], torch.bool) if xp is torch else np.array([True, True, True, False]),
        array([0.2, 0.5, 0.2, 0.0]),
        array([0.8, 0.6, 0.5, 0.0]),
        array([2, 1, 3, 0], torch.int64) if xp is torch else np.array([2, 1, 3, 0]),
        array([4.0] * 4),
        array([2.0] * 4),
    )


def test_bands_start_at_the_least_laxity_minimum_and_end_at_the_need() -> None:
    bands = _hand_bands()
    np.testing.assert_allclose(bands.low, [0.4, 0.4, 0.0, 0.0], atol=1e-5)
    np.testing.assert_allclose(bands.high, [2.0, 0.4, 1.2, 0.0])
    # Spare hours: hours left - need / charger power (2 - 1.2, 1 - 0.2, 3 - 0.6; the empty socket has no need).
    np.testing.assert_allclose(bands.laxity_h, [0.8, 0.8, 2.4, 0.0])
    # No dead zone: -1, 0 and +1 are the bottom, the middle and the top of every band.
    for action, fraction in ((-1.0, 0.0), (0.0, 0.5), (1.0, 1.0)):
        power = per_socket_power(np.full(4, action), bands)
        np.testing.assert_allclose(power, bands.low + fraction * (bands.high - bands.low))
    np.testing.assert_allclose(
        power_to_action(np.array([1.2, 0.4, 0.6, 0.0]), bands), [0.0, -1.0, 0.0, -1.0], atol=1e-6
    )
    # Guarantee off: [0, charger power] while plugged, even for an EV at its required SOC (CityLearn charges to 1).
    off = socket_bands(
        np.array([True, False, True]),
        np.array([0.0, 0.0, 0.9]),
        np.array([0.8, 0.0, 0.9]),
        np.array([1, 0, 2]),
        np.full(3, 4.0),
        np.full(3, 2.0),
        guarantee=False,
    )
    np.testing.assert_array_equal(off.low, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(off.high, [2.0, 0.0, 2.0])


def test_the_minimum_carries_the_margin_and_an_ev_beyond_its_chargers_reach_gets_full_power_at_once() -> None:
    # 2 kW charger, 4 kWh EV: 2.4 kWh in 2 h needs 0.4 kWh now (plus the margin); 6 kWh in 2 h cannot be met, so
    # full power from the first hour; 1.2 kWh at efficiency 0.8 is 1.5 kWh on the grid side; an EV above its
    # required SOC needs nothing.
    bands = socket_bands(
        np.array([True, True, True, True]),
        np.array([0.2, 0.0, 0.5, 0.95]),
        np.array([0.8, 1.5, 0.8, 0.9]),
        np.array([2, 2, 1, 4]),
        np.full(4, 4.0),
        np.full(4, 2.0),
        charger_efficiency=0.8,
    )
    np.testing.assert_allclose(bands.high, [2.0, 2.0, 1.5, 0.0])
    np.testing.assert_allclose(bands.low, [1.0 + GUARANTEE_MARGIN_KWH, 2.0, 1.5, 0.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(bands.laxity_h, [2 - 1.5, 2 - 3.75, 1 - 0.75, 4.0])
    exact = socket_bands(*(np.array([value]) for value in (True, 0.2, 0.8, 2, 4.0, 2.0)))
    assert exact.low[0] == pytest.approx(0.4 + GUARANTEE_MARGIN_KWH, rel=0, abs=1e-12)
    assert 0 < GUARANTEE_MARGIN_KWH < 1e-3


def test_an_unplugged_socket_has_an_empty_band_whatever_its_stale_soc_says() -> None:
    for guarantee in (True, False):
        bands = socket_bands(
            np.array([False, True]),
            np.array([0.1, 0.1]),
            np.array([0.9, 0.9]),
            np.array([3, 3]),
            np.full(2, 4.0),
            np.full(2, 2.0),
            guarantee=guarantee,
        )
        np.testing.assert_array_equal(bands.low[0], 0.0)
        np.testing.assert_array_equal(bands.high[0], 0.0)
        assert bands.laxity_h[0] == 3.0  # nothing needed: all its hours are spare
        assert bands.high[1] == 2.0


def test_action_count_per_layout_and_an_unknown_layout_is_refused() -> None:
    assert LAYOUTS == (PER_SOCKET, FLEET, SELF_CONSUMPTION_WINDOW)
    assert [action_count(layout, 4) for layout in LAYOUTS] == [5, 2, 4]
    assert action_count(PER_SOCKET, 1) == 2
    assert action_count("".join(["per_", "socket"]), 4) == 5  # a layout read from a config: an equal, other str
    with pytest.raises(ValueError, match="env.layout must be one of .*'per_sockets'"):
        action_count("per_sockets", 4)


def test_socket_power_reads_the_socket_actions_or_the_fleet_action_never_the_bess_action() -> None:
    bands = _hand_bands()
    read_from_config = "".join(["per_", "socket"])  # equal to PER_SOCKET, another str object
    for bess in (-1.0, 0.9):
        per_socket = socket_power(read_from_config, np.array([bess, -1.0, 1.0, 0.0, 0.5]), bands)
        np.testing.assert_allclose(per_socket, [0.4, 0.4, 0.6, 0.0], atol=1e-5)
        for layout in (FLEET, SELF_CONSUMPTION_WINDOW):  # the window layout's is the fleet action it was turned into
            np.testing.assert_allclose(
                socket_power(layout, np.array([bess, 0.0]), bands), [1.8, 0.4, 0.0, 0.0], atol=1e-5
            )


def test_fleet_power_tops_up_the_least_laxity_ev_first_and_numpy_equals_torch() -> None:
    bands = _hand_bands()
    # Flexible power above the minimums: 1.6 + 0 + 1.2 = 2.8 kW. Half of it (action 0) is 1.4 kW: socket 0 has
    # 0.8 spare hours, socket 2 has 2.4, so socket 0 takes all 1.4 kW.
    np.testing.assert_allclose(fleet_power(np.array(0.0), bands), [1.8, 0.4, 0.0, 0.0], atol=1e-5)
    # Action 0.5: 2.1 kW, 1.6 fill socket 0, the other 0.5 go to socket 2.
    np.testing.assert_allclose(fleet_power(np.array(0.5), bands), [2.0, 0.4, 0.5, 0.0], atol=1e-5)
    np.testing.assert_allclose(fleet_power(np.array(1.0), bands), bands.high)
    np.testing.assert_allclose(fleet_power(np.array(-1.0), bands), bands.low)
    rng = np.random.default_rng(0)
    for action in rng.uniform(-1, 1, 20):
        numpy_kw = fleet_power(np.array(action), bands)
        torch_kw = fleet_power(torch.tensor(action, dtype=torch.float64), _hand_bands(torch))
        np.testing.assert_array_equal(numpy_kw, torch_kw.numpy())
        np.testing.assert_array_equal(
            per_socket_power(np.full(4, action), bands),
            per_socket_power(torch.full((4,), action, dtype=torch.float64), _hand_bands(torch)).numpy(),
        )


def test_fleet_power_of_a_batch_orders_each_row_by_its_own_laxity() -> None:
    # Two rows of three 2-kW sockets, each EV needing 2 kWh (band [0, 2]): spare hours [3, 2, 4] in row 0, [4, 3, 2]
    # in row 1. Action -0.5 (a quarter of the 6 kW) gives the most urgent socket of each row 1.5 kW; action 0
    # (3 kW) fills it and gives the next one 1 kW.
    hours = [[4.0, 3.0, 5.0], [5.0, 4.0, 3.0]]
    for as_array in (np.array, lambda values: torch.tensor(values, dtype=torch.float64)):
        bands = socket_bands(
            as_array([[1.0] * 3] * 2) > 0,
            as_array([[0.5] * 3] * 2),
            as_array([[1.0] * 3] * 2),
            as_array(hours),
            as_array([[4.0] * 3] * 2),
            as_array([[2.0] * 3] * 2),
        )
        quarter = fleet_power(as_array([-0.5, -0.5]), bands)
        np.testing.assert_allclose(np.asarray(quarter), [[0.0, 1.5, 0.0], [0.0, 0.0, 1.5]])
        half = fleet_power(as_array([0.0, 0.0]), bands)
        np.testing.assert_allclose(np.asarray(half), [[1.0, 2.0, 0.0], [0.0, 1.0, 2.0]])


def test_ties_in_laxity_go_in_socket_order_in_numpy_and_torch() -> None:
    """128 EVs with the same spare hours (a large site): 10 kW of extra fills sockets 0-4, in numpy and in torch
    (a stable sort; torch's default sort reorders ties in arrays this long)."""
    sockets = 128
    values = {"soc": 0.5, "required": 1.0, "hours": 3.0, "battery": 4.0, "charger": 2.0}
    action = 2.0 * 10.0 / (2.0 * sockets) - 1.0
    expected = np.zeros(sockets)
    expected[:5] = 2.0
    for as_array in (np.array, lambda v: torch.tensor(v, dtype=torch.float64)):
        bands = socket_bands(as_array([1.0] * sockets) > 0, *(as_array([value] * sockets) for value in values.values()))
        np.testing.assert_allclose(np.asarray(fleet_power(as_array(action), bands)), expected, atol=1e-9)


def test_bands_are_the_same_bits_in_numpy_and_torch_for_a_batch_with_float32_soc() -> None:
    rng = np.random.default_rng(3)
    shape = (5, 6)
    connected = rng.uniform(size=shape) < 0.7
    soc = rng.uniform(0, 1, shape).astype(np.float32)  # CityLearn's SOC is float32
    required = rng.uniform(0.5, 1, shape)
    hours = rng.integers(1, 6, shape)
    battery, charger = rng.uniform(2, 8, shape), rng.choice([1.0, 3.7], shape)
    for guarantee in (True, False):
        ours = socket_bands(connected, soc.astype(np.float64), required, hours, battery, charger, guarantee=guarantee)
        theirs = socket_bands(
            *(torch.from_numpy(np.asarray(v)) for v in (connected, soc, required, hours, battery, charger)),
            guarantee=guarantee,
        )
        for name in ("low", "high", "laxity_h"):
            np.testing.assert_array_equal(getattr(ours, name), getattr(theirs, name).numpy(), err_msg=name)
        assert theirs.low.dtype == torch.float64


def test_a_wish_in_kw_maps_back_to_the_action_that_asks_for_it() -> None:
    bands = _hand_bands()
    # Per socket: outside the band the wish is projected into it; an empty band gets -1.
    np.testing.assert_allclose(power_to_action(np.array([0.0, 9.0, 0.3, 5.0]), bands), [-1.0, -1.0, -0.5, -1.0])
    np.testing.assert_allclose(power_to_action(np.array([9.0, 0.0, 1.2, 0.0]), bands), [1.0, -1.0, 1.0, -1.0])
    # Fleet: the extra above the minimums over the flexible 2.8 kW.
    assert power_to_fleet_action(np.array([1.8, 0.4, 0.0, 0.0]), bands) == pytest.approx(0.0, abs=1e-6)
    assert power_to_fleet_action(np.array([1.1, 0.4, 0.0, 0.0]), bands) == pytest.approx(-0.5, abs=1e-6)
    assert power_to_fleet_action(np.array([0.0, 0.0, 0.0, 0.0]), bands) == -1.0  # below every minimum
    assert power_to_fleet_action(np.array([5.0, 5.0, 5.0, 5.0]), bands) == 1.0  # beyond the top
    for action in (-0.6, 0.2, 0.7):
        wish = fleet_power(np.array(action), bands)
        assert power_to_fleet_action(wish, bands) == pytest.approx(action, abs=1e-6)
    # A band narrower than 1 kW: 0.5 kWh to go in 3 h on a 2-kW charger, no minimum; a quarter kW is half of it.
    narrow = socket_bands(*(np.array([value]) for value in (True, 0.5, 0.625, 3, 4.0, 2.0)))
    assert (narrow.low[0], narrow.high[0]) == (0.0, 0.5)
    assert power_to_fleet_action(np.array([0.25]), narrow) == 0.0
    assert power_to_action(np.array([0.25]), narrow)[0] == 0.0
    # A wish below one socket's minimum is not taken off another's extra: 1.2 kW above socket 2's minimum of 0.
    assert power_to_fleet_action(np.array([0.0, 0.4, 1.2, 0.0]), bands) == pytest.approx(2 * 1.2 / 2.8 - 1, abs=1e-6)
    empty = socket_bands(*(np.zeros(2, dtype=kind) for kind in (bool, float, float, int)), np.ones(2), np.ones(2))
    assert power_to_fleet_action(np.array([1.0, 1.0]), empty) == -1.0
    np.testing.assert_array_equal(power_to_action(np.array([1.0, 1.0]), empty), [-1.0, -1.0])


@pytest.mark.parametrize(
    ("prior", "expected"),
    [
        # residual -1, -0.5, 0, 0.5, 1: the lower half spans [-1, prior], the upper [prior, 1]
        (0.5, [-1.0, -0.25, 0.5, 0.75, 1.0]),
        (-0.6, [-1.0, -0.8, -0.6, 0.2, 1.0]),
        # a prior at a bound (the shaver's full charge, its EVs at their minimum): the other half spans the range
        (1.0, [-1.0, 0.0, 1.0, 1.0, 1.0]),
        (-1.0, [-1.0, -1.0, -1.0, 0.0, 1.0]),
    ],
)
def test_a_residual_maps_around_its_prior_onto_the_whole_range(prior: float, expected: list[float]) -> None:
    residuals = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    np.testing.assert_allclose(around_prior(residuals, np.full(5, prior)), expected, atol=1e-15)


def test_the_residual_map_is_monotone_exact_at_zero_and_the_ends_and_the_same_bits_in_numpy_and_torch() -> None:
    rng = np.random.default_rng(7)
    priors = np.concatenate([[-1.0, 1.0, 0.0, -(2.0**-53), 2.0**-53], rng.uniform(-1, 1, 59)])
    residuals = np.concatenate([[-1.0, 0.0, 1.0], rng.uniform(-1, 1, 200)])
    residuals = np.sort(residuals)
    prior, residual = np.meshgrid(priors, residuals, indexing="ij")  # [64 priors, 203 residuals]
    mapped = around_prior(residual, prior)
    assert np.all(np.diff(mapped, axis=1) >= 0.0)  # monotone in the residual for every prior
    assert np.all((mapped >= -1.0) & (mapped <= 1.0))
    np.testing.assert_array_equal(mapped[:, residuals == 0.0][:, 0], priors)  # 0 is the prior, to the bit
    np.testing.assert_array_equal(mapped[:, 0], -1.0)
    np.testing.assert_array_equal(mapped[:, -1], 1.0)
    np.testing.assert_array_equal(around_prior(torch.tensor(residual), torch.tensor(prior)).numpy(), mapped)
    assert around_prior(np.array(-0.0), np.array(0.25)) == 0.25  # a policy's -0.0 is the prior as well


def test_a_piecewise_affine_map_hits_its_centre_and_ends_and_is_affine_on_each_half() -> None:
    actions = np.array([-1.0, -0.25, 0.0, 0.5, 1.0])
    np.testing.assert_allclose(piecewise_affine(actions, 0.0, 1900.0, 5664.0), [0.0, 1425.0, 1900.0, 3782.0, 5664.0])
    for as_array in (np.array, lambda values: torch.tensor(values, dtype=torch.float64)):
        ends = piecewise_affine(as_array([-1.0, 0.0, 1.0]), 0.0, 0.1 * 3, 0.7)
        assert [float(value) for value in ends] == [0.0, 0.1 * 3, 0.7]
