"""The practitioner's MPC (``mpc_robust``): the hourly LP of control/mpc.py, planned against the bad side of the past.

Why: a monthly demand charge punishes one evening above forecast for the rest of the month. The certainty-equivalent
``mpc_forecast`` plans with the mean of the past three days, so on an evening whose mall load beats that mean it
empties the battery before the peak window ends and sets the month's peak; its energy cost matches the optimum's
while its demand charge does not. A site engineer hedges the forecast instead, and plans the EVs that will come:

- **PV and mall load: a box from the past ``envelope_days`` days.** For each later hour of the window the plan takes
  the highest mall load and the lowest PV seen at that hour of the day on the last ``envelope_days`` days (only hours
  already past), then widens the box by ``mall_margin`` (load x (1 + margin)) and ``pv_margin`` (PV x (1 - margin)).
  The hour now is observed. Net load enters the LP only through the hourly balance, and more of it can only raise the
  import that sets the peak, so the robust counterpart of the LP over this box is the LP at its upper corner
  (interval right-hand sides: Ben-Tal, El Ghaoui & Nemirovski, *Robust Optimization*, Princeton 2009, ch. 1); the
  box is the interval hull of the scenario MPC over those days (Calafiore & Campi, "The scenario approach to robust
  control design", IEEE TAC 51(5), 2006), one shared decision for every scenario. Peak demand charges in economic
  MPC: Risbeck & Rawlings, "Economic model predictive control for time-varying cost and peak demand charge
  optimization", IEEE TAC 65(7), 2020.
- **EV arrivals: yesterday repeats.** The sessions that arrived in the last 24 hours are planned again 24 h later
  (48 h later for a window past a day, ...), same socket, dwell and need, beside the EVs plugged in now. A forecast
  session may share a socket with a plugged EV (the LP has one variable per session-hour, not one per socket): it
  reserves energy, not a socket.
- **Horizon** ``horizon`` hours (24 to 48: a window past midnight sees tomorrow's morning PV).
- **The days before the year** (``year_before``): a site starts January with December metered, so the box and
  yesterday's arrivals of the year's first days come from the last ``envelope_days`` days of the year before (another
  draw of the same profile: control/site_years.py ``year_before``). Without them the first hours plan with the hour
  now held flat and no EV to come, and the evening's peak that follows sets January's demand charge.

Every knob is tuned on the training years like an agent's hyperparameters (``tune-reference``,
experiments/tune_reference.py), and read from ``configs/tuned/mpc_robust_tariff.yaml`` by the reference table.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import yaml

from iquitos_lightning.control.mpc import MPCController, session_arrays
from iquitos_lightning.envs.state import SiteState
from iquitos_lightning.site.series import SiteSeries

HOURS_PER_DAY = 24
ROBUST = "robust"
TUNED_SETTINGS = Path("configs/tuned/mpc_robust_tariff.yaml")


@dataclass(frozen=True)
class RobustSettings:
    """The knobs of :class:`RobustMPCController` (the defaults: the hand-set hedge that first beat the rule by far)."""

    horizon: int = 24
    envelope_days: int = 3
    mall_margin: float = 0.10
    pv_margin: float = 0.0
    plan_arrivals: bool = True

    def __post_init__(self) -> None:
        if not 2 <= self.horizon <= 7 * HOURS_PER_DAY:
            raise ValueError(f"mpc_robust horizon must be 2 to 168 hours, got {self.horizon}")
        if self.envelope_days < 1:
            raise ValueError(f"mpc_robust envelope_days must be 1 or more, got {self.envelope_days}")
        if not (0.0 <= self.mall_margin <= 1.0 and 0.0 <= self.pv_margin <= 1.0):
            raise ValueError(f"mpc_robust margins must lie in [0, 1], got {self.mall_margin}, {self.pv_margin}")

    def describe(self) -> str:
        arrivals = "yesterday's EV arrivals" if self.plan_arrivals else "plugged EVs only"
        return (
            f"{self.horizon} h, worst of {self.envelope_days} past days, mall +{100 * self.mall_margin:.1f} %, "
            f"PV -{100 * self.pv_margin:.1f} %, {arrivals}"
        )


def load_settings(path: Path = TUNED_SETTINGS) -> RobustSettings:
    """The tuned knobs (``tune-reference`` writes them), or the defaults when the file is missing."""
    if not Path(path).is_file():
        return RobustSettings()
    values = yaml.safe_load(Path(path).read_text()) or {}
    known = set(asdict(RobustSettings()))
    unknown = sorted(set(values.get("settings", {})) - known)
    if unknown:
        raise ValueError(f"{path}: unknown mpc_robust setting(s) {unknown}; known: {sorted(known)}")
    return RobustSettings(**values.get("settings", {}))


def past_envelope(values: np.ndarray, t: int, hours: int, days: int, worst: str) -> np.ndarray:
    """[hours - 1] for each later hour ``t + k`` of the window: the max (``worst="max"``) or min of ``values`` at that
    hour of the day over the ``days`` most recent days already past at ``t``; the value now where none is."""
    k = np.arange(1, hours)
    first_day = np.ceil(k / HOURS_PER_DAY).astype(int)  # the most recent day whose same hour is <= t
    past = t + k[:, None] - HOURS_PER_DAY * (first_day[:, None] + np.arange(days)[None, :])
    known = past >= 0
    picked = np.where(known, values[np.clip(past, 0, None)], np.nan)
    reduce = np.nanmax if worst == "max" else np.nanmin
    with np.errstate(all="ignore"):
        envelope = reduce(np.where(known.any(axis=1, keepdims=True), picked, values[t]), axis=1)
    return envelope


class RobustMPCController(MPCController):
    """``mpc_forecast``'s LP with a hedged PV / mall box and yesterday's EV arrivals (module docstring)."""

    def __init__(
        self,
        series: SiteSeries,
        objective: str,
        settings: RobustSettings | None = None,
        year_before: SiteSeries | None = None,
    ) -> None:
        self.settings = settings or RobustSettings()
        # "perfect" builds no forecast table (the past-days mean's reaches 24 h only); this class plans with its box
        super().__init__(series, objective, "perfect", horizon=self.settings.horizon)
        self.forecast = ROBUST  # from here on the parent plans no true arrivals either
        self.name = f"mpc_{ROBUST}"
        # the hours the plan may look back on: the year's, after the last days of the year before when known
        self.lead = HOURS_PER_DAY * self.settings.envelope_days if year_before is not None else 0
        self.known_mall_kw, self.known_pv_kw = series.mall_kw, series.pv_kw
        self.known_sessions = (self.arrival, self.departure, self.socket, self.need)
        if year_before is not None:
            self.known_mall_kw = np.concatenate([year_before.mall_kw[-self.lead :], series.mall_kw])
            self.known_pv_kw = np.concatenate([year_before.pv_kw[-self.lead :], series.pv_kw])
            self.known_sessions = _with_last_day_of(year_before, self.known_sessions)

    def _planned_pv_and_mall(self, state: SiteState, t: int, hours: int) -> tuple[np.ndarray, np.ndarray]:
        days, now = self.settings.envelope_days, t + self.lead
        mall = past_envelope(self.known_mall_kw, now, hours, days, "max") * (1.0 + self.settings.mall_margin)
        pv = past_envelope(self.known_pv_kw, now, hours, days, "min") * (1.0 - self.settings.pv_margin)
        return np.concatenate([[state.pv_kw], pv]), np.concatenate([[state.mall_kw], mall])

    def _coming_sessions(self, t: int, hours: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if not self.settings.plan_arrivals:
            return super()._coming_sessions(t, hours)
        arrival, departure, socket, need = self.known_sessions
        recent = np.flatnonzero((arrival > t - HOURS_PER_DAY) & (arrival <= t))
        repeats = np.arange(1, math.ceil(hours / HOURS_PER_DAY) + 1)
        shift = (HOURS_PER_DAY * repeats[:, None] + np.zeros(len(recent), dtype=int)[None, :]).ravel()
        index = np.tile(recent, len(repeats))
        start = arrival[index] + shift - t
        inside = start < hours
        index, start, shift = index[inside], start[inside], shift[inside]
        end = departure[index] + shift - t
        return socket[index], start, end, need[index]


def _with_last_day_of(year_before: SiteSeries, sessions: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """(arrival, departure, socket, need) of the year's sessions after those that arrived on the last day of
    ``year_before``, their hours counted back from the year's hour 0 (arrivals -24..-1): yesterday's EVs of hour 0."""
    arrival, departure, socket, need = session_arrays(year_before)
    last_day = arrival - year_before.hours >= -HOURS_PER_DAY
    earlier = (
        arrival[last_day] - year_before.hours,
        departure[last_day] - year_before.hours,
        socket[last_day],
        need[last_day],
    )
    return tuple(np.concatenate([old, new]) for old, new in zip(earlier, sessions, strict=True))
