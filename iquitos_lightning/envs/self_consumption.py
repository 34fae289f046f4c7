"""The ``self_consumption_window`` action layout (the card's): the BESS action is the share of the hour's grid exchange
the battery takes over, with one such action for each kind of hour; 0 is an idle battery.

Why: what a good controller of this site does with its battery is a few behaviours: store every PV surplus, cover the
net load in the evening peak window, leave the battery alone otherwise. In the ``fleet`` layout each of these is a
power that depends on the hour's net load, which a policy must hit exactly; here each is one action value: -1 takes
over the whole exchange (charge the whole surplus, or cover the whole load: import 0 while the battery can), 0 idles,
+1 charges from the grid at full power. The layout has four actions, ``[surplus action, window action, other action,
fleet]``: the first applies in the hours with a PV surplus (the hour's net load with the EVs decides), the second in
the site's peak window (the tariff's published hours, ``in_peak_window``) without surplus, the third in the other
hours without surplus, the fourth is the ``fleet`` layout's EV action unchanged. So the rule-based controller is three
constants (-1, -1, 0) and how much to store, cover or idle at each hour is the agent's to learn (the layouts this one
grew out of, one share for every hour and one for surplus/no-surplus, are in docs/experiments.md and git).

The map, array-generic (numpy for the CityLearn env, torch for the twin, elementwise float64 operations so both give
the same bits): a BESS action ``a`` in [-1, 0] is a BESS power ``a x (mall + EV - PV)`` (kW, + charging): ``-a`` of
the surplus stored, or ``-a`` of the load covered; in [0, 1]: ``a x P`` of charge from the grid; clipped at the
battery's power ``P``, as a fraction of it (the ``fleet`` layout's BESS action); the simulator clips at the SOC window.

An idle band (``idle_band`` b, ``env.idle_band``; 0: none) makes idling a range instead of a point: every BESS action
within b of 0 idles and the rest of each half is stretched back onto it (``a`` -> ``sign(a) x (|a| - b) / (1 - b)``),
so -1, 0 and +1 keep their meaning and the map stays continuous. Why: a critic cannot tell a small take-over or
grid charge in an hour where the rule idles from idling (a few thousandths of a step's return, inside its error on
the weather's swings), so the deterministic policy's mean wanders around 0 there and every wander moves energy at
the wrong hour (docs/control.md); with a band, a mean that wanders inside it still idles. The band says nothing
about when to idle: that is still the agent's to learn.
"""

from __future__ import annotations

import numpy as np

from iquitos_lightning.envs.actions import SocketBands, fleet_power
from iquitos_lightning.envs.arrays import Array, clip, is_torch, sequential_sum, where
from iquitos_lightning.site.config import BatteryConfig


def check_idle_band(idle_band: float) -> float:
    """``idle_band`` if it is a width in [0, 1), else a one-line error."""
    if not 0.0 <= idle_band < 1.0:
        raise ValueError(f"idle_band must be in [0, 1) (the BESS actions within it of 0 idle), got {idle_band!r}")
    return idle_band


def outside_idle_band(bess_action: Array, idle_band: float) -> Array:
    """The BESS action with its idle band taken out: 0 within ``idle_band`` of 0, ``sign(a) x (|a| - b) / (1 - b)``
    beyond (elementwise, so numpy and torch give the same bits); ``idle_band`` 0 returns the action itself."""
    if not idle_band:
        return bess_action
    magnitude = where(bess_action < 0, -bess_action, bess_action)
    beyond = where(magnitude > idle_band, (magnitude - idle_band) / (1.0 - idle_band), magnitude * 0.0)
    return where(bess_action < 0, -beyond, beyond)


def self_consumption_bess_kw(bess_action: Array, net_load_kw: Array, power_kw: float, idle_band: float = 0.0) -> Array:
    """The BESS power (kW, + charging) of a BESS action in [-1, 1] at this net load, before the power clip."""
    share = outside_idle_band(bess_action, idle_band)
    return where(share < 0, share * net_load_kw, share * power_kw)


def self_consumption_fleet_action(
    action: Array, pv_kw: Array, mall_kw: Array, bands: SocketBands, bess: BatteryConfig, idle_band: float = 0.0
) -> Array:
    """The ``fleet``-layout action [..., 2] of one share ``action[..., 0]`` for every hour and the fleet action
    ``action[..., 1]``: the map each of the window layout's BESS actions is, in the hours it applies to."""
    net_load_kw = fleet_net_load_kw(action[..., 1], pv_kw, mall_kw, bands)
    return _fleet_action(action[..., 0], action[..., 1], net_load_kw, bess, idle_band)


def window_self_consumption_fleet_action(
    action: Array,
    pv_kw: Array,
    mall_kw: Array,
    bands: SocketBands,
    bess: BatteryConfig,
    in_peak_window: Array,
    idle_band: float = 0.0,
) -> Array:
    """The ``fleet``-layout action [..., 2] the env applies for a ``self_consumption_window`` action [..., 4]
    (clipped): ``action[..., 0]`` where the hour has a PV surplus, else ``action[..., 1]`` in the peak window and
    ``action[..., 2]`` outside it, each as the ``self_consumption`` BESS action; ``action[..., 3]`` is the fleet
    action."""
    net_load_kw = fleet_net_load_kw(action[..., 3], pv_kw, mall_kw, bands)
    without_surplus = where(in_peak_window, action[..., 1], action[..., 2])
    bess_action = where(net_load_kw < 0, action[..., 0], without_surplus)
    return _fleet_action(bess_action, action[..., 3], net_load_kw, bess, idle_band)


def _fleet_action(
    bess_action: Array, fleet_action: Array, net_load_kw: Array, bess: BatteryConfig, idle_band: float
) -> Array:
    """The ``fleet``-layout action [..., 2] of the BESS action that applies this hour, once the layout has chosen
    which of its BESS actions applies."""
    bess_kw = self_consumption_bess_kw(bess_action, net_load_kw, bess.power_kw, idle_band)
    return with_bess_power(fleet_action, bess_kw, bess)


def fleet_net_load_kw(fleet_action: Array, pv_kw: Array, mall_kw: Array, bands: SocketBands) -> Array:
    """The hour's net load (mall + EVs - PV, kW) with the EVs at what the ``fleet`` action ``fleet_action`` gives
    them: what the battery's share of the exchange acts on."""
    ev_kw = sequential_sum(fleet_power(fleet_action, bands))
    return mall_kw + ev_kw - pv_kw


def with_bess_power(fleet_action: Array, bess_kw: Array, bess: BatteryConfig) -> Array:
    """The ``fleet`` action [..., 2]: the BESS power ``bess_kw`` (kW, + charging) clipped at the battery's power, as a
    fraction of it, and ``fleet_action`` unchanged."""
    fraction = clip(bess_kw, -bess.power_kw, bess.power_kw) / bess.power_kw
    if is_torch(fleet_action):
        import torch  # lazy: numpy callers never load torch here

        return torch.stack([fraction.to(fleet_action.dtype), fleet_action], -1)
    return np.stack([np.asarray(fraction, dtype=float), np.asarray(fleet_action, dtype=float)], -1)
