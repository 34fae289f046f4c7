"""The peak shaver: charge outside the evening window, hold the window's import flat inside it (array-generic).

Why: on the ``tariff`` objective most of the room is the demand charge on each month's largest import in the evening
window, and what cuts it is holding that import *flat*: a battery that covers the first evening hours at full power
runs empty and the later hours set the peak. The shaver is the best hand-written controller the agents' observation
allows (75.9 % of the tariff gap with the true coming hours, 58.9 % with the ``past_days`` forecasts), and the
reference run whose month-to-date peaks a training episode starts from (``env.training.start_peak: reference``,
control/training_references.py).

The shaver, from what the ``tariff`` observation shows (its ``fleet`` action for the hour):
- EVs: their guaranteed minimum only (``fleet`` action -1), so the evening carries no optional EV load;
- BESS outside the peak window: charge at full power (the simulator stops at the SOC ceiling);
- BESS inside the window: water-filling (:func:`flat_import_level`): the one import level ``L`` that the energy
  left in the BESS can hold over the window's remaining hours, with this hour's net load and, for the later
  hours, the mall load minus PV of those hours (the observation's forecasts) plus this hour's EV power; the
  battery covers ``net load - L`` when positive (within its power), and idles otherwise.
Array-generic (numpy for the CityLearn env, torch for the twin: sort, cumulative sums and elementwise float64
operations give both the same bits).
"""

from __future__ import annotations

import numpy as np

from iquitos_lightning.envs.actions import fleet_power
from iquitos_lightning.envs.arrays import Array, clip, is_torch, sequential_sum, stacked_pair, where
from iquitos_lightning.envs.hour_context import HourContext
from iquitos_lightning.site.config import BatteryConfig

PEAK_SHAVER = "shaver"  # its name as a controller of the reference runs
EV_MINIMUM = -1.0  # the fleet action that gives every EV its guaranteed minimum only
FULL_CHARGE = 1.0  # the BESS action outside the window


def flat_import_level(net_kw: Array, energy_kwh: Array) -> Array:
    """[...] the level ``L >= 0`` with ``sum(max(net - L, 0)) = energy`` over the last axis of ``net_kw`` [..., K]
    (0 when the energy covers all of the positive net load): water-filling from the top.

    With the loads sorted from the largest, the level that spends the energy on the k largest is ``(their sum -
    energy) / k``; the answer is the first k whose level is not below the (k+1)-th load.
    """
    if is_torch(net_kw):
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


def window_discharge_action(hour: HourContext, ev_kw: Array, bess: BatteryConfig) -> Array:
    """The BESS action [...] (a fraction of its power, <= 0) that holds this peak-window hour's import at the flat
    level, given the EVs' power ``ev_kw``."""
    net_load_kw = hour.mall_kw + ev_kw - hour.pv_kw
    if is_torch(hour.window_rest_kw):
        import torch  # lazy: numpy callers never load torch here

        later_kw = torch.where(hour.window_rest_open, hour.window_rest_kw + ev_kw[..., None], 0.0)
        loads = torch.cat([net_load_kw[..., None], later_kw], -1)
    else:
        rest_kw = hour.window_rest_kw + np.asarray(ev_kw, dtype=float)[..., None]
        later_kw = np.where(hour.window_rest_open, rest_kw, 0.0)
        loads = np.concatenate([np.asarray(net_load_kw, dtype=float)[..., None], later_kw], -1)
    usable_soc = hour.bess_soc - bess.soc_min
    available_kwh = clip(usable_soc * (bess.capacity_kwh * bess.one_way_efficiency), 0.0, float("inf"))
    level = flat_import_level(loads, available_kwh)
    return -clip(net_load_kw - level, 0.0, bess.power_kw) / bess.power_kw


class PeakShaver:
    """The peak shaver in the ``fleet`` layout (module docstring)."""

    name = PEAK_SHAVER
    layout = "fleet"

    def act(self, hour: HourContext) -> Array:
        """The ``[BESS, fleet]`` action [..., 2] (float64) for the hour."""
        fleet = EV_MINIMUM + 0.0 * hour.bess_soc
        ev_kw = sequential_sum(fleet_power(fleet, hour.bands))
        inside = window_discharge_action(hour, ev_kw, hour.bess)
        bess_action = where(hour.in_peak_window, inside, FULL_CHARGE + 0.0 * inside)
        return stacked_pair(bess_action, fleet, hour.bess_soc)
