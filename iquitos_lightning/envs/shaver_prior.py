"""The ``shaver_residual`` layout: an agent's two actions around a flat-evening prior, the peak shaver.

Why: on the ``tariff`` objective most of the room is the demand charge on each month's largest import in the
evening window, and what cuts it is holding that import *flat*: a battery that covers the first evening hours
at full power runs empty and the later hours set the peak. Agents trained from scratch settle on exactly that
(docs/experiments.md: SAC with an import set-point action learns to charge by day and then discharge at full power
from 18 h).
Residual policy learning (as ``rule_residual`` does for the ``thesis`` reward) starts the agent at a controller
that already holds the evening flat, and leaves it the corrections: EV charging ahead of the window, less or
more charging, a level above or below the shaver's.

The shaver (what an action of 0 does), from what the ``tariff`` observation shows:
- EVs: their guaranteed minimum only (``fleet`` action -1), so the evening carries no optional EV load;
- BESS outside the peak window: charge at full power (the simulator stops at the SOC ceiling);
- BESS inside the window: water-filling (:func:`flat_import_level`): the one import level ``L`` that the energy
  left in the BESS can hold over the window's remaining hours, with this hour's net load and, for the later
  hours, the mall load minus PV of those hours (the observation's forecasts) plus this hour's EV power; the
  battery covers ``net load - L`` when positive (within its power), and idles otherwise.

The agent's ``[BESS, fleet]`` is mapped around the prior's ``fleet``-layout action
(:func:`~iquitos_lightning.envs.actions.around_prior`: -1 and +1 the bounds, 0 the prior's action), as
``rule_residual`` maps it around the rule's. Array-generic like :mod:`~iquitos_lightning.envs.rule_prior` (numpy for
the CityLearn env, torch for the twin: sort, cumulative sums and elementwise float64 operations give both the
same bits; tests/envs/test_twin.py holds them equal).
"""

from __future__ import annotations

import numpy as np

from iquitos_lightning.envs.actions import Array, SocketBands, _is_torch, _where, around_prior, fleet_power
from iquitos_lightning.envs.rule_prior import _clip, _sequential_sum
from iquitos_lightning.site.config import BatteryConfig


def flat_import_level(net_kw: Array, energy_kwh: Array) -> Array:
    """[...] the level ``L >= 0`` with ``sum(max(net - L, 0)) = energy`` over the last axis of ``net_kw`` [..., K]
    (0 when the energy covers all of the positive net load): water-filling from the top.

    The same as control/tariff_rule.flat_level (a loop over one hour list), vectorised: with the loads sorted
    from the largest, the level that spends the energy on the k largest is ``(their sum - energy) / k``; the
    answer is the first k whose level is not below the (k+1)-th load.
    """
    if _is_torch(net_kw):
        import torch  # lazy: numpy callers never load torch here

        loads = torch.sort(net_kw.clamp_min(0.0), dim=-1, descending=True).values
        count = torch.arange(1, loads.shape[-1] + 1, dtype=loads.dtype, device=loads.device)
        following = torch.cat([loads[..., 1:], torch.zeros_like(loads[..., :1])], -1)
        levels = (loads.cumsum(-1) - energy_kwh[..., None]) / count
        fits = levels >= following
        fits[..., -1] = True
        first = fits.to(torch.int8).argmax(-1, keepdim=True)
        return levels.gather(-1, first)[..., 0].clamp_min(0.0)
    loads = np.sort(np.clip(net_kw, 0.0, None), axis=-1)[..., ::-1]
    count = np.arange(1, loads.shape[-1] + 1, dtype=float)
    following = np.concatenate([loads[..., 1:], np.zeros_like(loads[..., :1])], -1)
    levels = (np.cumsum(loads, axis=-1) - np.asarray(energy_kwh, dtype=float)[..., None]) / count
    fits = levels >= following
    fits[..., -1] = True
    first = np.argmax(fits, axis=-1)[..., None]
    return np.clip(np.take_along_axis(levels, first, -1)[..., 0], 0.0, None)


def window_discharge_action(
    pv_kw: Array,
    mall_kw: Array,
    ev_kw: Array,
    bess_soc: Array,
    window_rest_kw: Array,
    window_rest_open: Array,
    bess: BatteryConfig,
) -> Array:
    """The BESS action [...] (a fraction of its power, <= 0) that holds this peak-window hour's import at the flat
    level, given the EVs' power ``ev_kw``.

    ``window_rest_kw`` [..., W-1]: mall load minus PV of the later hours of this hour's peak window (0 outside
    it), ``window_rest_open`` [..., W-1] which of them are such hours.
    """
    net_load_kw = mall_kw + ev_kw - pv_kw
    if _is_torch(window_rest_kw):
        import torch  # lazy: numpy callers never load torch here

        later_kw = torch.where(window_rest_open, window_rest_kw + ev_kw[..., None], 0.0)
        loads = torch.cat([net_load_kw[..., None], later_kw], -1)
    else:
        later_kw = np.where(window_rest_open, window_rest_kw + np.asarray(ev_kw, dtype=float)[..., None], 0.0)
        loads = np.concatenate([np.asarray(net_load_kw, dtype=float)[..., None], later_kw], -1)
    available_kwh = _clip((bess_soc - bess.soc_min) * (bess.capacity_kwh * bess.one_way_efficiency), 0.0, float("inf"))
    level = flat_import_level(loads, available_kwh)
    return -_clip(net_load_kw - level, 0.0, bess.power_kw) / bess.power_kw


def shaver_fleet_action(
    pv_kw: Array,
    mall_kw: Array,
    ev_kw: Array,
    bess_soc: Array,
    in_peak_window: Array,
    window_rest_kw: Array,
    window_rest_open: Array,
    bess: BatteryConfig,
) -> Array:
    """The shaver's BESS action [...] for this hour: full charge outside the window, the flat level inside."""
    inside = window_discharge_action(pv_kw, mall_kw, ev_kw, bess_soc, window_rest_kw, window_rest_open, bess)
    return _where(in_peak_window, inside, 1.0 + 0.0 * inside)


def add_shaver(
    residual: Array,
    pv_kw: Array,
    mall_kw: Array,
    bands: SocketBands,
    bess_soc: Array,
    in_peak_window: Array,
    window_rest_kw: Array,
    window_rest_open: Array,
    bess: BatteryConfig,
) -> Array:
    """The ``fleet``-layout action [..., 2] the env applies: the agent's residual around the shaver's, in [-1, 1]."""
    outside_bess, prior_fleet = 1.0, -1.0
    fleet = around_prior(residual[..., 1], prior_fleet)
    ev_kw = _sequential_sum(fleet_power(fleet, bands))
    inside = window_discharge_action(pv_kw, mall_kw, ev_kw, bess_soc, window_rest_kw, window_rest_open, bess)
    prior_bess = _where(in_peak_window, inside, outside_bess + 0.0 * inside)
    bess_action = around_prior(residual[..., 0], prior_bess)
    if _is_torch(residual):
        import torch  # lazy: numpy callers never load torch here

        return torch.stack([bess_action.to(residual.dtype), fleet.to(residual.dtype)], -1)
    return np.stack([np.asarray(bess_action, dtype=float), np.asarray(fleet, dtype=float)], -1)
