"""The reference controllers of the benchmark, each the project's counterpart of a published row.

- :class:`NoControl`: batteries idle (the published 1.000 row).
- :class:`CityLearnRule`: CityLearn's own ``BasicBatteryRBC`` (charge 11 % of the battery's power 06:00-14:00, give
  back 6.7 % at other hours), through its public API; the published table has no rule row.
- :class:`SelfConsumptionRule`: what a home battery does out of the box: it takes the building's surplus PV and
  covers its import, here the last hour's (the hour before is what a controller knows); no published counterpart.
- :class:`PerfectForesightPlan`: the LP of ``plan_lp.py`` over the whole phase, solved once with every row known
  (the published "full-horizon LP"); ``pv_kw=4.0`` gives it the published inputs (every PV read as 4 kW).
- :class:`ModelPredictive`: the same LP over the next 24 rows, solved again every ``replan_every`` rows from the
  batteries' measured state, with a perfect forecast (the coming rows themselves) or the past days' same hours
  (``forecast="past_days"``: the mean of the last ``days`` days at each hour; ``days=1`` is persistence), and
  optionally the published MPC's penalty on action changes (``smoothing``).
  The published MPCs re-planned every 8 hours over 5 noisy scenarios with an action-smoothing penalty (0.1), and
  idled the first 24 hours of each phase; this one uses the site's own past before a phase where it exists (a
  building has its history) and idles only where there is none (phase 1's first day under a past-days forecast).

Every plan is in the published LP's unit (a fraction of the 6.4 kWh capacity per hour) and is handed to CityLearn 3 as
a fraction of the battery's 5 kW (3.0.2 reads the action so; 2.2b0 read it as a fraction of capacity).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iquitos_lightning.citylearn_2022.dataset import BATTERY_CAPACITY_KWH, BATTERY_POWER_KW, HOURS, Phase, load_data
from iquitos_lightning.citylearn_2022.plan_lp import Battery, plan

CAPACITY_TO_POWER = BATTERY_CAPACITY_KWH / BATTERY_POWER_KW  # a plan's unit in CityLearn 3's action unit


class NoControl:
    def start(self, phase: Phase, env: Any) -> None:
        self.buildings = len(phase.buildings)

    def act(self, row: int, observation: list[float], soc: np.ndarray) -> np.ndarray:
        return np.zeros(self.buildings)


class CityLearnRule:
    """CityLearn's ``BasicBatteryRBC`` on the observation of the row before (its hour decides the action)."""

    def start(self, phase: Phase, env: Any) -> None:
        from citylearn.agents.rbc import BasicBatteryRBC  # lazy: importing CityLearn costs seconds

        self.rule = BasicBatteryRBC(env)

    def act(self, row: int, observation: list[float], soc: np.ndarray) -> np.ndarray:
        return np.asarray(self.rule.predict([observation])[0], float)


def self_consumption_action(net: np.ndarray, row: int) -> np.ndarray:
    """The self-consumption rule's CityLearn 3 action for ``row``: minus the hour before's net load (kWh, without
    battery; ``net`` is (buildings, hours) of the year) over the battery's 5 kW."""
    return -net[:, row - 1] / BATTERY_POWER_KW


class SelfConsumptionRule:
    """Each battery charges the building's surplus of the hour before and discharges to cover its import, up to 5 kW:
    the self-consumption mode home batteries ship with (no forecast, no tariff, no district)."""

    def start(self, phase: Phase, env: Any) -> None:
        self.net = load_data().net_load(phase.buildings, slice(0, HOURS))

    def act(self, row: int, observation: list[float], soc: np.ndarray) -> np.ndarray:
        return self_consumption_action(self.net, row)


class PerfectForesightPlan:
    """One LP over the phase's controlled rows (``first + 1..last``), every row known; played back row by row."""

    def __init__(self, pv_kw: float | None = None, battery: Battery | None = None, interior_point: bool = True) -> None:
        self.pv_kw = pv_kw
        self.battery = battery or Battery()
        self.interior_point = interior_point

    def start(self, phase: Phase, env: Any) -> None:
        data = load_data()
        rows = slice(phase.first + 1, phase.last + 1)
        net = data.net_load(phase.buildings, rows, self.pv_kw) / BATTERY_CAPACITY_KWH
        self.first = phase.first + 1
        self.schedule = plan(
            net, data.price[rows], data.carbon[rows], np.zeros(len(phase.buildings)), self.battery,
            interior_point=self.interior_point,
        )  # fmt: skip

    def act(self, row: int, observation: list[float], soc: np.ndarray) -> np.ndarray:
        return self.schedule[:, row - self.first] * CAPACITY_TO_POWER


class ModelPredictive:
    """The surrogate LP over the next ``horizon`` rows from the measured state, on a forecast of the net load."""

    def __init__(
        self,
        forecast: str = "perfect",
        days: int = 1,
        horizon: int = 24,
        replan_every: int = 1,
        battery: Battery | None = None,
        smoothing: float = 0.0,
    ) -> None:
        if forecast not in ("perfect", "past_days"):
            raise ValueError(f"forecast {forecast!r}: use 'perfect' or 'past_days'")
        if days < 1 or horizon < 2 or replan_every < 1 or replan_every > horizon:
            raise ValueError(
                f"days {days}, horizon {horizon}, replan_every {replan_every}: need days >= 1, horizon >= 2 and "
                "1 <= replan_every <= horizon"
            )
        self.forecast, self.days, self.horizon, self.replan_every = forecast, days, horizon, replan_every
        self.battery = battery or Battery()
        self.smoothing = smoothing

    def start(self, phase: Phase, env: Any) -> None:
        data = load_data()
        self.buildings = phase.buildings
        self.net = data.net_load(phase.buildings, slice(0, HOURS)) / BATTERY_CAPACITY_KWH
        self.price, self.carbon = data.price, data.carbon
        self.plan = np.zeros((len(phase.buildings), 0))
        self.planned_at = -(10**9)
        self.last_action = np.zeros(len(phase.buildings))

    def _forecast(self, rows: np.ndarray) -> np.ndarray | None:
        """The net load of ``rows`` as the controller sees it at ``rows[0]`` (data known up to ``rows[0] - 1``)."""
        if self.forecast == "perfect":
            return self.net[:, rows]
        known = rows[0] - 1
        past = [rows - 24 * back for back in range(1, self.days + 1)]
        past = [hours for hours in past if hours.min() >= 0 and hours.max() <= known]
        return np.mean([self.net[:, hours] for hours in past], axis=0) if past else None

    def act(self, row: int, observation: list[float], soc: np.ndarray) -> np.ndarray:
        offset = row - self.planned_at
        if offset >= self.replan_every or offset >= self.plan.shape[1]:
            rows = np.arange(row, min(row + self.horizon, HOURS))
            net = self._forecast(rows)
            if net is None or len(rows) < 2:
                self.last_action = np.zeros(len(self.buildings))
                return self.last_action
            self.plan = plan(
                net, self.price[rows], self.carbon[rows], np.clip(soc, 0.0, 1.0), self.battery, window_form=True,
                smoothing=self.smoothing, previous_action=self.last_action,
            )  # fmt: skip
            self.planned_at, offset = row, 0
        self.last_action = self.plan[:, offset]
        return self.last_action * CAPACITY_TO_POWER
