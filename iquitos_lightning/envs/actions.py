"""What an action means physically: the action layouts, the EV-service guarantee and the inverse map.

Why one module: the CityLearn env, the batched twin, the reference controllers and the KPIs'
feasibility check must agree to the bit on how an action in [-1, 1] becomes kW, or the twin drifts
from CityLearn and the references measure a different control problem. Every function here is
array-generic (numpy for the CityLearn env and the controllers, torch for the twin, [..., S] with
any leading batch shape) and uses only elementwise IEEE operations, a stable sort and a cumulative
sum, so numpy and torch give the same bits.

The band of a socket (grid-side kW for this hour), with the guarantee on (``ev_guarantee``):
- ``low``: the least-laxity minimum, the least power that still lets full power in the hours
  left after this one reach the required SOC by departure (plus :data:`GUARANTEE_MARGIN_KWH`,
  so float rounding never leaves an EV a hair short); an EV whose need exceeds charger power x
  hours left gets full power from its first hour (the unavoidable shortfall stays unavoidable);
- ``high``: ``min(charger power, remaining need)``: nothing beyond what the EV needs;
- an empty socket has the band [0, 0].
With the guarantee off the band is [0, charger power] while an EV is plugged (the seeds' physics,
CityLearn charges up to SOC 1).

Layouts (``env.layout``):
- ``per_socket`` (1 + S actions, the seeds' layout): ``[BESS, socket_0 .. socket_{S-1}]``, each
  socket affinely over its band, ``low + (a + 1) / 2 x (high - low)``: -1 is the minimum, +1 the
  maximum, 0 half way; no dead zone;
- ``fleet`` (2 actions): ``[BESS, fleet]``; the fleet action takes the same affine fraction of the
  fleet's flexible power ``sum(high - low)``, shared out above each socket's minimum least-laxity
  first (the EV that has the fewest spare hours is topped up first);
- ``self_consumption_window`` (4 actions, the card's): the share of the hour's grid exchange the battery takes over
  (-1 all of the surplus or load, 0 idle, +1 charge from the grid), one share for surplus hours, one for the peak
  window, one for the other hours, then the ``fleet`` action (:mod:`~iquitos_lightning.envs.self_consumption`);
A residual agent (``env.residual``) acts around a controller of ``control/`` in that controller's layout: the two it
may name (the rule-based controller, the peak shaver) act in ``fleet``, and a run in another layout is refused in one
line (control/residual.py). The wrapper above the env maps its action around the controller's with
:func:`around_prior`; the env itself runs no controller.
The ``per_socket`` and ``fleet`` BESS action is a fraction of its nominal power (+1 full charge, -1 full discharge,
grid side); CityLearn clips it at the SOC limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from iquitos_lightning.envs.arrays import Array, clip_low, is_torch, minimum, where
from iquitos_lightning.site.series import SiteSeries

PER_SOCKET = "per_socket"
FLEET = "fleet"
# BESS actions = the share of the hour's exchange the battery takes over, 0 idle: one for surplus hours, one for the
# peak window, one for the other hours, then the fleet (4 actions; envs/self_consumption.py)
SELF_CONSUMPTION_WINDOW = "self_consumption_window"
LAYOUTS = (PER_SOCKET, FLEET, SELF_CONSUMPTION_WINDOW)
# the layouts whose BESS action is a share of the hour's exchange, 0 idle (the ones an idle band applies to)
SELF_CONSUMPTION_LAYOUTS = (SELF_CONSUMPTION_WINDOW,)

# Energy (kWh) added to the least-laxity minimum so float32 SOC rounding cannot leave an EV a hair short.
GUARANTEE_MARGIN_KWH = 1e-6


def action_count(layout: str, sockets: int) -> int:
    """How many actions a layout has: 1 + S (``per_socket``), 4 (``self_consumption_window``) or 2 (every other)."""
    if layout not in LAYOUTS:
        raise ValueError(f"env.layout must be one of {LAYOUTS}, got {layout!r}")
    if layout == PER_SOCKET:
        return 1 + sockets
    return {SELF_CONSUMPTION_WINDOW: 4}.get(layout, 2)


@dataclass
class SocketBands:
    """The power band of every socket for one hour (grid-side kW, [..., S]) and its least-laxity order key."""

    low: Array
    high: Array
    laxity_h: Array  # spare hours: hours left - need / charger power (smaller = more urgent)
    # grid-side kWh each plugged EV still needs to reach its required SOC (0 where empty); None where a caller
    # builds bands by hand. The compact observation sums it (envs/fleet_features.py), so it is kept here.
    need_kwh: Array | None = None
    # the least-laxity fill, kept by the first fleet_power of the hour (:func:`least_laxity_fill`): it does not depend
    # on the action, the window layout maps the fleet action twice an hour (its net load, then the sockets' power),
    # and its sort and cumulative sum were a quarter of a 1,024-env twin step on one CPU thread (docs/twin.md)
    fill: LeastLaxityFill | None = field(default=None, compare=False, repr=False)


@dataclass
class LeastLaxityFill:
    """What sharing a fleet's power least laxity first needs of one hour's bands, whatever the action."""

    order: Array  # the sockets' least-laxity order: a stable argsort of laxity_h [..., S]
    room: Array  # each socket's headroom (high - low) in that order
    before: Array  # the headroom of the sockets ahead of each one in that order (a cumulative sum, in index order)
    total: Array  # the whole flexible power [..., 1]


def least_laxity_fill(bands: SocketBands) -> LeastLaxityFill:
    """``bands.fill``, computed on its first use in the hour (by :func:`fleet_power`)."""
    if bands.fill is not None:
        return bands.fill
    headroom = bands.high - bands.low
    if is_torch(headroom):
        import torch  # lazy: numpy callers (CityLearn env, controllers) never load torch here

        order = torch.argsort(bands.laxity_h, dim=-1, stable=True)
        room = torch.gather(headroom, -1, order)
        filled = torch.cumsum(room, dim=-1)
    else:
        order = np.argsort(bands.laxity_h, axis=-1, kind="stable")
        room = np.take_along_axis(headroom, order, -1)
        filled = np.cumsum(room, axis=-1)
    bands.fill = LeastLaxityFill(order=order, room=room, before=filled - room, total=filled[..., -1:])
    return bands.fill


def socket_bands(
    connected: Array,
    soc: Array,
    required_soc: Array,
    hours_left: Array,
    battery_kwh: Array,
    charger_kw: Array,
    *,
    charger_efficiency: float | Array = 1.0,
    guarantee: bool = True,
) -> SocketBands:
    """The band [low, high] of each socket this hour (module docstring), from the state at the start of the hour.

    ``soc`` is each plugged EV's SOC now (float32 values are used as they are), ``required_soc`` its
    target, ``hours_left`` the whole hours until it leaves (1 on its last hour); all [..., S].
    """
    if is_torch(soc):
        soc = soc.to(required_soc.dtype)
        hours_left = hours_left.to(required_soc.dtype)
    need_kwh = clip_low(required_soc - soc, 0.0) * battery_kwh / charger_efficiency
    need_kwh = where(connected, need_kwh, 0.0 * need_kwh)
    full_kw = where(connected, charger_kw + 0.0 * need_kwh, 0.0 * need_kwh)
    laxity_h = hours_left - need_kwh / charger_kw
    if not guarantee:
        return SocketBands(low=0.0 * need_kwh, high=full_kw, laxity_h=laxity_h, need_kwh=need_kwh)
    high = minimum(need_kwh, full_kw)
    later_kwh = clip_low(hours_left - 1.0, 0.0) * charger_kw
    low = minimum(clip_low(need_kwh - later_kwh + GUARANTEE_MARGIN_KWH, 0.0), high)
    low = where(need_kwh > 0, low, 0.0 * need_kwh)
    return SocketBands(low=low, high=high, laxity_h=laxity_h, need_kwh=need_kwh)


def action_fraction(action: Array) -> Array:
    """[-1, 1] -> [0, 1], affinely: (a + 1) / 2."""
    return (action + 1.0) * 0.5


def piecewise_affine(action: Array, low: Array, centre: Array, high: Array) -> Array:
    """[-1, 0] -> [low, centre] and [0, 1] -> [centre, high], affinely on each half (``low <= centre <= high``).

    Why: a map whose 0 must be a given value (a prior's action, a set-point where the battery idles) that is not
    the middle of the range. Adding the action and clipping leaves a dead half where the centre is near an end;
    this map reaches the whole range from [-1, 1], is monotone (each half is ``centre + a x width`` with a
    width >= 0), gives ``centre`` exactly at 0 and ``low``/``high`` exactly at -1/+1 (the affine form can miss
    an end by one ulp, so the ends are taken as they are). Elementwise float64 operations only, so numpy and
    torch give the same bits.
    """
    below = centre + action * (centre - low)
    above = centre + action * (high - centre)
    mapped = where(action < 0, below, above)
    return where(action <= -1.0, low + 0.0 * mapped, where(action >= 1.0, high + 0.0 * mapped, mapped))


def around_prior(residual: Array, prior: Array) -> Array:
    """A residual agent's action in [-1, 1] around its controller's (the prior's) action in [-1, 1]: -1 and +1 are
    the action's bounds, 0 is the prior exactly (:func:`piecewise_affine`; the wrapper of control/residual.py).

    Why not ``clip(prior + residual)``: where the prior sits near a bound (the shaver charges at +1 outside the
    evening, its EVs sit at -1) most of the sum lands beyond the bound and is clipped, so half of the residual's
    range changes nothing and the other half cannot reach the far bound. Here the half that points away from the
    prior's bound spans all the way to the other one; the half that points into it is flat only where the prior
    is exactly at that bound (there is nothing beyond it).
    """
    return piecewise_affine(residual, -1.0, prior, 1.0)


def per_socket_power(socket_actions: Array, bands: SocketBands) -> Array:
    """Each socket's kW from its own action [..., S]: ``low + (a + 1) / 2 x (high - low)``."""
    return bands.low + action_fraction(socket_actions) * (bands.high - bands.low)


def fleet_power(fleet_action: Array, bands: SocketBands) -> Array:
    """Each socket's kW from one fleet action [...]: the fraction of the flexible power, least laxity first."""
    fill = least_laxity_fill(bands)
    if is_torch(fill.room):
        import torch  # lazy: numpy callers (CityLearn env, controllers) never load torch here

        extra = action_fraction(fleet_action)[..., None] * fill.total
        sorted_extra = torch.minimum((extra - fill.before).clamp_min(0.0), fill.room)
        return bands.low + torch.empty_like(sorted_extra).scatter_(-1, fill.order, sorted_extra)
    extra = action_fraction(np.asarray(fleet_action))[..., None] * fill.total
    sorted_extra = np.minimum(np.maximum(extra - fill.before, 0.0), fill.room)
    allocated = np.empty_like(sorted_extra)
    np.put_along_axis(allocated, fill.order, sorted_extra, -1)
    return bands.low + allocated


def socket_power(layout: str, action: Array, bands: SocketBands) -> Array:
    """Grid-side kW of every socket [..., S] for a full env action [..., A] (clipped to [-1, 1] already; for the
    derived layouts the ``fleet`` action they were turned into, envs/env_action.py)."""
    if layout == PER_SOCKET:
        return per_socket_power(action[..., 1:], bands)
    return fleet_power(action[..., 1], bands)


def power_to_action(socket_kw: np.ndarray, bands: SocketBands) -> np.ndarray:
    """The ``per_socket`` actions that ask for ``socket_kw`` (the inverse of :func:`per_socket_power`).

    What a physical controller (rule-based, an LP or MPC plan) sends: a wish outside the band is
    projected into it (the guarantee wins); a socket with an empty band gets -1.
    """
    room = bands.high - bands.low
    safe = np.where(room > 0, room, 1.0)
    action = np.where(room > 0, 2.0 * (np.asarray(socket_kw) - bands.low) / safe - 1.0, -1.0)
    return np.clip(action, -1.0, 1.0)


def power_to_fleet_action(socket_kw: np.ndarray, bands: SocketBands) -> float:
    """The ``fleet`` action that asks for the total ``socket_kw`` (shared out least-laxity first by the env)."""
    room = float((bands.high - bands.low).sum())
    if room <= 0:
        return -1.0
    extra = float(np.clip(np.asarray(socket_kw) - bands.low, 0.0, None).sum())
    return float(np.clip(2.0 * extra / room - 1.0, -1.0, 1.0))


def unavoidable_unmet_kwh(series: SiteSeries) -> float:
    """EV energy no controller can deliver: each session's need beyond its charger power x dwell hours.

    The unmet energy of any controller is at least this; "EVs fully served" means unmet equals it.
    Computed with the env's own band function (:func:`socket_bands`): each session follows the top of its band
    (full power while it needs energy) from arrival to departure; what it still needs then is unavoidable.
    """
    sessions = series.sessions
    if sessions.empty:
        return 0.0
    socket = sessions["socket"].to_numpy(dtype=int)
    charger_kw = series.socket_charger_kw[socket]
    dwell = (sessions["departure_step"] - sessions["arrival_step"]).clip(lower=0).to_numpy(dtype=int)
    # The LP and CityLearn use the battery-side need at charger efficiency 1 (the builder's setting).
    remaining_kwh = series.session_energy_needed_kwh().astype(float)
    ones = np.ones_like(remaining_kwh)
    for hour in range(int(dwell.max(initial=0))):
        plugged = hour < dwell
        bands = socket_bands(plugged, 0.0 * ones, remaining_kwh, dwell - hour, ones, charger_kw)
        remaining_kwh = np.clip(remaining_kwh - bands.high, 0.0, None)
    return float(remaining_kwh.sum())
