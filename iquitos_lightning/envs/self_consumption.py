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
"""

from __future__ import annotations

from iquitos_lightning.envs.actions import Array, SocketBands, _where
from iquitos_lightning.envs.grid_target import fleet_net_load_kw, with_bess_power
from iquitos_lightning.site.config import BatteryConfig


def self_consumption_bess_kw(bess_action: Array, net_load_kw: Array, power_kw: float) -> Array:
    """The BESS power (kW, + charging) of a BESS action in [-1, 1] at this net load, before the power clip."""
    return _where(bess_action < 0, bess_action * net_load_kw, bess_action * power_kw)


def self_consumption_fleet_action(
    action: Array, pv_kw: Array, mall_kw: Array, bands: SocketBands, bess: BatteryConfig
) -> Array:
    """The ``fleet``-layout action [..., 2] the env applies for a ``self_consumption`` action [..., 2] (clipped)."""
    net_load_kw = fleet_net_load_kw(action, pv_kw, mall_kw, bands)
    return with_bess_power(action, self_consumption_bess_kw(action[..., 0], net_load_kw, bess.power_kw), bess)
