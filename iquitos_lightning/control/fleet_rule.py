"""The rule-based controller as one ``fleet`` action per hour, array-generic: what a residual agent starts from.

Why a second form of :class:`~iquitos_lightning.control.references.RuleBasedController`: that one plans each socket's
kW for one env (numpy, :class:`~iquitos_lightning.envs.state.SiteState`); a residual agent on the batched twin needs
the rule's action for B envs at once, in the ``fleet`` layout its two actions live in. This is the same rule in that
layout, from the hour's context both simulators expose (envs/hour_context.py), array-generic like envs/actions.py
(numpy for the CityLearn env, torch for the twin: the same bits on both). On the ``thesis`` reward the rule is within
0.3 % of the perfect-foresight optimum, so an agent that must rediscover it from scratch loses to it by noise alone;
residual policy learning (Silver et al. 2018, Johannink et al. 2019; control/residual.py) starts the agent *at* the
rule and lets it learn only the correction.

The rule:
- EVs: each gets its band's minimum (the EV guarantee); PV surplus over the mall and those minimums tops them up
  least-laxity first; in the ``fleet`` layout that is the fraction ``surplus / flexible power`` (clipped to [0, 1])
  of the fleet's flexible power;
- BESS: stores the surplus left (net load < 0) within its SOC room, covers the net load inside the peak window
  within its SOC floor, idles otherwise; as a fraction of its nominal power.
"""

from __future__ import annotations

from iquitos_lightning.envs.arrays import Array, clip, minimum, sequential_sum, stacked_pair, where
from iquitos_lightning.envs.hour_context import HourContext

FLEET_RULE = "rule"  # its name as a residual's prior (env.residual)


def rule_fleet_action(hour: HourContext) -> tuple[Array, Array]:
    """The rule-based controller's ``(BESS, fleet)`` actions for this hour ([...] each)."""
    bands, bess = hour.bands, hour.bess
    minimum_kw = sequential_sum(bands.low)
    room_kw = sequential_sum(bands.high - bands.low)
    surplus_kw = hour.pv_kw - hour.mall_kw - minimum_kw
    safe_room = where(room_kw > 0, room_kw, 1.0 + 0.0 * room_kw)
    fraction = where(room_kw > 0, clip(surplus_kw / safe_room, 0.0, 1.0), 0.0 * room_kw)
    ev_kw = minimum_kw + fraction * room_kw

    eta = bess.one_way_efficiency
    net_load_kw = hour.mall_kw + ev_kw - hour.pv_kw
    store_room_kwh = clip((bess.soc_max - hour.bess_soc) * (bess.capacity_kwh / eta), 0.0, float("inf"))
    available_kwh = clip((hour.bess_soc - bess.soc_min) * (bess.capacity_kwh * eta), 0.0, float("inf"))
    charge_kw = minimum(minimum(-net_load_kw, bess.power_kw + 0.0 * net_load_kw), store_room_kwh)
    discharge_kw = minimum(minimum(net_load_kw, bess.power_kw + 0.0 * net_load_kw), available_kwh)
    bess_kw = where(net_load_kw < 0, charge_kw, where(hour.in_peak_window, -discharge_kw, 0.0 * net_load_kw))
    return bess_kw / bess.power_kw, 2.0 * fraction - 1.0


class FleetRule:
    """The rule-based controller in the ``fleet`` layout (module docstring), for a residual agent or a reference run."""

    name = FLEET_RULE
    layout = "fleet"

    def act(self, hour: HourContext) -> Array:
        """The ``[BESS, fleet]`` action [..., 2] (float64) for the hour."""
        bess_action, fleet_action = rule_fleet_action(hour)
        return stacked_pair(bess_action, fleet_action, hour.bess_soc)
