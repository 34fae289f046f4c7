"""The ``self_consumption`` action layout: the BESS action is the share of the hour's grid exchange the battery takes
over; 0 is an idle battery.

Why: on the seeds' ``thesis`` reward (CO2, PV use, cost) the rule-based controller is within 2.2 of the optimum's
yearly return, and what it does is two things: it stores every PV surplus, and in the peak window it covers the net
load; outside the window without surplus it leaves the battery alone. In the ``fleet`` layout each of these is a
power that depends on the hour's net load, which a policy must hit exactly. In ``grid_target`` the constant action
-1 (import set-point 0 kW) stores every surplus and covers every load at any hour, so SAC found it at once
(-703.5 on the default year against the rule's -695.95, docs/experiments.md), but idling needs a set-point equal to
the hour's net load. Here every one of those behaviours is one action value: -1 takes over the whole exchange
(charge the whole surplus, or cover the whole load: import 0 while the battery can), 0 idles, +1 charges from the
grid at full power. The rule is then "-1 in the peak window or when there is surplus, 0 otherwise", a function of the
hour and the net load the observation holds. Which hours to cover, and how much, is still the agent's to learn.

The map, array-generic like :mod:`~iquitos_lightning.envs.grid_target` (numpy for the CityLearn env, torch for the
twin, elementwise float64 operations so both give the same bits):
- ``action[1]``: the ``fleet`` layout's EV action, unchanged;
- ``action[0] = a`` in [-1, 0]: BESS power ``a x (mall + EV - PV)`` (kW, + charging): ``-a`` of the surplus stored,
  or ``-a`` of the load covered; in [0, 1]: ``a x P`` of charge from the grid;
- clipped at the battery's power ``P``, as a fraction of it (the ``fleet`` layout's BESS action); the simulator
  clips at the SOC window.

``self_consumption_split`` (3 actions) is the same map with one BESS action for the hours with a PV surplus and one
for the hours without (the hour's net load with the EVs decides which applies), then the fleet action:
``[surplus action, load action, fleet]``. Why: the rule is then "store every surplus" on the first and "cover the
load in the peak window, idle otherwise" on the second, each a function of the hour alone, where in
``self_consumption`` one action must jump from -1 to 0 as the net load crosses 0. Measured before it: a policy on
``self_consumption`` stored the surplus of the 7-8 h hours (mean action -0.99) and took over the load of the cloudy
mornings with the same action, which the rule leaves alone (docs/experiments.md, "thesis SAC with an idle band").

``self_consumption_window`` (4 actions) splits the hours without surplus again at the site's peak window (the
tariff's published hours, ``in_peak_window``): ``[surplus action, window action, other action, fleet]``. Why: on
the split layout the load action had to be -1 in the window and 0 before it, and the trained policy's load action
stayed between -0.5 and -0.7 from 23 h through the morning (the night's hours, where the battery is empty and the
action changes nothing, carry the evening's -1 on to the morning's, where it takes over the load of cloudy mornings;
docs/experiments.md, "thesis SAC with the hours outside the window given their own battery action"). With its own
action for the hours outside the window, the rule is three constants
(-1, -1, 0); how much to store, cover or idle at each hour is still the agent's to learn.

An idle band (``idle_band`` b, ``env.idle_band``; 0: none) makes idling a range instead of a point: every BESS action
within b of 0 idles and the rest of each half is stretched back onto it (``a`` -> ``sign(a) x (|a| - b) / (1 - b)``),
so -1, 0 and +1 keep their meaning and the map stays continuous. Why: a critic cannot tell a small take-over or
grid charge in an hour where the rule idles from idling (a few thousandths of a step's return, inside its error on
the weather's swings), so the deterministic policy's mean wanders around 0 there and every wander moves energy at
the wrong hour (docs/control.md); with a band, a mean that wanders inside it still idles. The band says nothing
about when to idle: that is still the agent's to learn.
"""

from __future__ import annotations

from iquitos_lightning.envs.actions import Array, SocketBands, _where
from iquitos_lightning.envs.grid_target import fleet_net_load_kw, with_bess_power
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
    magnitude = _where(bess_action < 0, -bess_action, bess_action)
    beyond = _where(magnitude > idle_band, (magnitude - idle_band) / (1.0 - idle_band), magnitude * 0.0)
    return _where(bess_action < 0, -beyond, beyond)


def self_consumption_bess_kw(bess_action: Array, net_load_kw: Array, power_kw: float, idle_band: float = 0.0) -> Array:
    """The BESS power (kW, + charging) of a BESS action in [-1, 1] at this net load, before the power clip."""
    share = outside_idle_band(bess_action, idle_band)
    return _where(share < 0, share * net_load_kw, share * power_kw)


def self_consumption_fleet_action(
    action: Array, pv_kw: Array, mall_kw: Array, bands: SocketBands, bess: BatteryConfig, idle_band: float = 0.0
) -> Array:
    """The ``fleet``-layout action [..., 2] the env applies for a ``self_consumption`` action [..., 2] (clipped)."""
    net_load_kw = fleet_net_load_kw(action[..., 1], pv_kw, mall_kw, bands)
    return _fleet_action(action[..., 0], action[..., 1], net_load_kw, bess, idle_band)


def split_self_consumption_fleet_action(
    action: Array, pv_kw: Array, mall_kw: Array, bands: SocketBands, bess: BatteryConfig, idle_band: float = 0.0
) -> Array:
    """The ``fleet``-layout action [..., 2] the env applies for a ``self_consumption_split`` action [..., 3]
    (clipped): the BESS takes ``action[..., 0]`` where the hour has a PV surplus, ``action[..., 1]`` where it has
    not, each as the ``self_consumption`` BESS action; ``action[..., 2]`` is the fleet action."""
    net_load_kw = fleet_net_load_kw(action[..., 2], pv_kw, mall_kw, bands)
    bess_action = _where(net_load_kw < 0, action[..., 0], action[..., 1])
    return _fleet_action(bess_action, action[..., 2], net_load_kw, bess, idle_band)


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
    without_surplus = _where(in_peak_window, action[..., 1], action[..., 2])
    bess_action = _where(net_load_kw < 0, action[..., 0], without_surplus)
    return _fleet_action(bess_action, action[..., 3], net_load_kw, bess, idle_band)


def _fleet_action(
    bess_action: Array, fleet_action: Array, net_load_kw: Array, bess: BatteryConfig, idle_band: float
) -> Array:
    """The ``fleet``-layout action [..., 2] of the BESS action that applies this hour: the one step every
    ``self_consumption`` layout ends with, once it has chosen which of its BESS actions applies."""
    bess_kw = self_consumption_bess_kw(bess_action, net_load_kw, bess.power_kw, idle_band)
    return with_bess_power(fleet_action, bess_kw, bess)
