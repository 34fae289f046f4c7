"""The ``rule_residual`` action layout: an agent's two actions added to the rule-based controller's own.

Why: on the ``thesis`` reward the rule-based controller is within 0.3 % of the perfect-foresight
optimum, so an agent that must rediscover it from scratch loses to it by noise alone; residual
policy learning (Silver et al. 2018, Johannink et al. 2019) starts the agent *at* the rule and
lets it learn only the correction. With ``rule_residual`` the env computes, every hour, the
``fleet``-layout action the rule-based controller (``control/references.py``) would send, and maps
the agent's ``[BESS, fleet]`` around it (:func:`~iquitos_lightning.envs.actions.around_prior`: -1 and +1
the bounds, 0 the rule's action): an action of 0 *is* the rule (tests:
``tests/envs/test_twin.py``, ``test_a_zero_residual_is_the_rule_based_controller``, replays the reference and this
layout side by side), an
untrained agent whose mean action is near 0 starts near the rule, and every KPI stays the env's own.

The rule (the same as :class:`~iquitos_lightning.control.references.RuleBasedController`'s):
- EVs: each gets its band's minimum (the EV guarantee); PV surplus over the mall and those
  minimums tops them up least-laxity first; in the ``fleet`` layout that is the fraction
  ``surplus / flexible power`` (clipped to [0, 1]) of the fleet's flexible power;
- BESS: stores the surplus left (net load < 0) within its SOC room, covers the net load inside the
  peak window within its SOC floor, idles otherwise; as a fraction of its nominal power.
It lives here, not in ``control/``, because the env applies it inside its step (envs sit below
control); every function is array-generic like :mod:`~iquitos_lightning.envs.actions`.
"""

from __future__ import annotations

import numpy as np

from iquitos_lightning.envs.actions import Array, SocketBands, _is_torch, _minimum, _where, around_prior
from iquitos_lightning.site.config import BatteryConfig


def _clip(value: Array, low: float, high: float) -> Array:
    return value.clamp(low, high) if _is_torch(value) else np.clip(value, low, high)


def _sequential_sum(values: Array) -> Array:
    """Sum over the last axis in index order (a cumulative sum's end): numpy and torch give the same bits,
    which their own ``sum`` (pairwise, vectorised) does not promise; the twin must equal CityLearn."""
    if _is_torch(values):
        return values.cumsum(-1)[..., -1]
    return np.cumsum(values, axis=-1)[..., -1]


def rule_fleet_action(
    pv_kw: Array, mall_kw: Array, bands: SocketBands, bess_soc: Array, in_peak_window: Array, bess: BatteryConfig
) -> tuple[Array, Array]:
    """The rule-based controller's ``(BESS, fleet)`` actions for this hour ([...] each), from the hour's state.

    ``bess_soc`` is the BESS SOC at the start of the hour (fraction of capacity), ``in_peak_window``
    a bool (array) true inside ``[grid.peak_start_hour, grid.peak_end_hour)``.
    """
    minimum_kw = _sequential_sum(bands.low)
    room_kw = _sequential_sum(bands.high - bands.low)
    surplus_kw = pv_kw - mall_kw - minimum_kw
    safe_room = _where(room_kw > 0, room_kw, 1.0 + 0.0 * room_kw)
    fraction = _where(room_kw > 0, _clip(surplus_kw / safe_room, 0.0, 1.0), 0.0 * room_kw)
    ev_kw = minimum_kw + fraction * room_kw

    eta = bess.one_way_efficiency
    net_load_kw = mall_kw + ev_kw - pv_kw
    store_room_kwh = _clip((bess.soc_max - bess_soc) * (bess.capacity_kwh / eta), 0.0, float("inf"))
    available_kwh = _clip((bess_soc - bess.soc_min) * (bess.capacity_kwh * eta), 0.0, float("inf"))
    charge_kw = _minimum(_minimum(-net_load_kw, bess.power_kw + 0.0 * net_load_kw), store_room_kwh)
    discharge_kw = _minimum(_minimum(net_load_kw, bess.power_kw + 0.0 * net_load_kw), available_kwh)
    bess_kw = _where(net_load_kw < 0, charge_kw, _where(in_peak_window, -discharge_kw, 0.0 * net_load_kw))
    return bess_kw / bess.power_kw, 2.0 * fraction - 1.0


def add_rule(
    residual: Array, pv_kw: Array, mall_kw: Array, bands: SocketBands, bess_soc: Array, in_peak_window: Array,
    bess: BatteryConfig,
) -> Array:  # fmt: skip
    """The ``fleet``-layout action [..., 2] the env applies: the agent's residual around the rule's, in [-1, 1]."""
    rule_bess, rule_fleet = rule_fleet_action(pv_kw, mall_kw, bands, bess_soc, in_peak_window, bess)
    if _is_torch(residual):
        import torch  # lazy: numpy callers never load torch here

        rule = torch.stack([rule_bess, rule_fleet], -1).to(residual.dtype)
    else:
        rule = np.stack([np.asarray(rule_bess, dtype=float), np.asarray(rule_fleet, dtype=float)], -1)
    return around_prior(residual, rule)
