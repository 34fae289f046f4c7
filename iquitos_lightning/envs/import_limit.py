"""The grid connection's limit: the hour's command curtailed so the site never imports more than it may.

Why here, in one array-generic function: the CityLearn env and the twin must curtail the same command to the bit
(numpy for one, torch for the other), after every layout's mapping, so every controller and agent obeys the
limit the same way in both simulators. The curtailment, given the hour's PV, mall load and the EVs' bands:

1. the battery's charging is cut to what the limit leaves after the mall and the EVs (a discharge is never
   touched, and the battery is never made to discharge);
2. only if the mall and the EVs alone exceed it, every EV's power above its guaranteed minimum is shed in
   proportion (the guarantee wins: an EV still leaves with what it needs).

What is left above the limit after that (a mall load beyond the connection) is imported and shows in the KPIs'
largest import. The command is capped :data:`IMPORT_LIMIT_MARGIN_KW` below the limit, so the import CityLearn
computes in float32 (its own rounding of PV, load and battery energy) stays under the stated figure.
"""

from __future__ import annotations

from iquitos_lightning.envs.arrays import Array, clip, clip_low, minimum, sequential_sum, sequential_sums, where

# kW below the stated limit that the curtailed command aims at: float32 rounding of a ~3,500 kW import is ~2e-4.
IMPORT_LIMIT_MARGIN_KW = 0.01


def usable_import_kw(limit_kw: float | None) -> float:
    """The import the curtailed command (and every LP plan) stays under for a stated limit (inf: none)."""
    return float("inf") if limit_kw is None else limit_kw - IMPORT_LIMIT_MARGIN_KW


def cap_import(
    bess_action: Array,
    socket_kw: Array,
    *,
    pv_kw: Array,
    mall_kw: Array,
    guaranteed_kw: Array,
    bess_power_kw: float,
    limit_kw: float | None,
) -> tuple[Array, Array]:
    """The (BESS action [...], socket kW [..., S]) curtailed under ``limit_kw`` (module docstring); unchanged
    where ``limit_kw`` is None.

    ``bess_action`` is the battery's command in [-1, 1] (a fraction of ``bess_power_kw``, + charge), ``socket_kw``
    each socket's grid-side kW inside its band, ``guaranteed_kw`` the band's minimum (``SocketBands.low``).
    """
    if limit_kw is None:
        return bess_action, socket_kw
    usable = usable_import_kw(limit_kw)
    flexible_kw = socket_kw - guaranteed_kw
    socket_total, flexible_total = sequential_sums(socket_kw, flexible_kw)
    over_kw = (mall_kw - pv_kw + socket_total) - usable  # > 0: over the limit with the battery idle
    safe_total = where(flexible_total > 0, flexible_total, 1.0 + 0.0 * flexible_total)
    shed_share = where(flexible_total > 0, clip(over_kw / safe_total, 0.0, 1.0), 0.0 * flexible_total)
    shed = shed_share[..., None]
    # The guaranteed minimum plus what is kept of the rest (exactly the minimum when all is shed); hours without
    # shedding keep the command's own bits.
    socket_kw = where(shed > 0, guaranteed_kw + (1.0 - shed) * flexible_kw, socket_kw)
    room_kw = clip_low(usable - (mall_kw - pv_kw + sequential_sum(socket_kw)), 0.0)
    bess_action = where(bess_action > 0, minimum(bess_action, room_kw / bess_power_kw), bess_action)
    return bess_action, socket_kw
