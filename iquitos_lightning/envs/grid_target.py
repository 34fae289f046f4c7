"""The ``grid_target`` action layout: the agent names the grid import it wants, the battery makes it so.

Why: on the ``tariff`` bill almost all the room is the demand charge on each month's largest
peak-window import, and what cuts it is one decision a day, *how flat* to hold the import through
the evening window, taken with the day's forecasts. In the ``fleet`` layout the agent must find
that as a BESS power hour by hour, where a fixed discharge runs empty in a cloudy or busy evening
and a fixed charge overshoots; the critic must learn the net load from scratch before any of that
is visible. Here the BESS action is a *set-point*: the import level ``T`` the agent wants this
hour, and the battery moves by ``T - net load`` (charging below it, discharging above, within its
power; the simulator clips at the SOC window). A constant action already behaves like a peak
shaver with that threshold, so what is left to learn is the threshold: a function of the hour, the
forecasts, the BESS SOC and the month-to-date peak the ``tariff`` observation holds. This is the
usual split of a site controller into a set-point (learned) and a tracking loop (fixed), with the
tracking loop written out here and tested.

The map, array-generic like :mod:`~iquitos_lightning.envs.actions` (numpy for the CityLearn env,
torch for the twin, elementwise float64 operations so both give the same bits):
- ``action[1]``: the fleet action of the ``fleet`` layout (EV power above the guaranteed minimum,
  least laxity first), unchanged;
- ``action[0]`` in [-1, 1] -> the set-point ``T``, piecewise affine around the site's centre ``C``
  (:func:`import_centre_kw`): [-1, 0] -> [0, C], [0, 1] -> [C, max_import_kw] (no dead zone: -1 asks for
  no import at all, so the BESS covers every net load it can; 0 for the mean evening net load, where the
  battery idles on an average evening hour; +1 for the largest import the site can draw, so the BESS
  charges at full power);
- the BESS power ``clip(T - (mall + EV - PV), -P, +P)`` as a fraction of its power ``P``, the ``fleet``
  layout's BESS action.
"""

from __future__ import annotations

import numpy as np

from iquitos_lightning.envs.actions import Array, SocketBands, _is_torch, fleet_power, piecewise_affine
from iquitos_lightning.envs.objectives import peak_window_steps
from iquitos_lightning.envs.rule_prior import _clip, _sequential_sum
from iquitos_lightning.site.config import BatteryConfig
from iquitos_lightning.site.series import SiteSeries


def import_centre_kw(series: SiteSeries, max_import_kw: float) -> float:
    """The set-point of action 0: the mean of mall load minus PV over the year's peak-window hours, in
    [0, max_import_kw] (one number per site, computed from its series, the same float in both simulators).

    Why: with the set-point of 0 at half the largest import (2,832 kW on the default site, against a mean
    evening net load of 1,901 kW) the battery charged in the evening whatever the net load: an untrained policy
    never discharged, and a constant action's bill was the same anywhere in [0, 1] (docs/control.md).
    The EVs are left out: their power is the agent's second action (at their guaranteed minimum they add
    88 kW to the default site's average evening hour), so action 0 discharges about that much on average.
    """
    window = peak_window_steps(series.config, series.hours)
    mean_kw = float(np.mean(series.mall_kw[window] - series.pv_kw[window]))
    return min(max(mean_kw, 0.0), max_import_kw)


def import_target_kw(bess_action: Array, centre_kw: float, max_import_kw: float) -> Array:
    """The import set-point of a BESS action in [-1, 1]: [-1, 0] -> [0, centre_kw], [0, 1] -> [centre_kw, max]."""
    return piecewise_affine(bess_action, 0.0, centre_kw, max_import_kw)


def grid_target_fleet_action(
    action: Array,
    pv_kw: Array,
    mall_kw: Array,
    bands: SocketBands,
    bess: BatteryConfig,
    max_import_kw: float,
    centre_kw: float,
) -> Array:
    """The ``fleet``-layout action [..., 2] the env applies for a ``grid_target`` action [..., 2] (clipped);
    ``centre_kw`` is the set-point of action 0 (:func:`import_centre_kw`)."""
    net_load_kw = fleet_net_load_kw(action[..., 1], pv_kw, mall_kw, bands)
    target_kw = import_target_kw(action[..., 0], centre_kw, max_import_kw)
    return with_bess_power(action[..., 1], target_kw - net_load_kw, bess)


def fleet_net_load_kw(fleet_action: Array, pv_kw: Array, mall_kw: Array, bands: SocketBands) -> Array:
    """The hour's net load (mall + EVs - PV, kW) with the EVs at what the ``fleet`` action ``fleet_action`` gives
    them: what a battery layout over the fleet (this one, the ``self_consumption`` layouts) acts on."""
    ev_kw = _sequential_sum(fleet_power(fleet_action, bands))
    return mall_kw + ev_kw - pv_kw


def with_bess_power(fleet_action: Array, bess_kw: Array, bess: BatteryConfig) -> Array:
    """The ``fleet`` action [..., 2]: the BESS power ``bess_kw`` (kW, + charging) clipped at the battery's power, as a
    fraction of it, and ``fleet_action`` unchanged."""
    fraction = _clip(bess_kw, -bess.power_kw, bess.power_kw) / bess.power_kw
    if _is_torch(fleet_action):
        import torch  # lazy: numpy callers never load torch here

        return torch.stack([fraction.to(fleet_action.dtype), fleet_action], -1)
    return np.stack([np.asarray(fraction, dtype=float), np.asarray(fleet_action, dtype=float)], -1)
