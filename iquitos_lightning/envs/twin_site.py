"""One twin env behind the CityLearn env's controller interface (reset, step, state, flows, departures).

Why: the reference controllers (rule-based, tariff rule, LP replay, MPC) read the physical state, which
only the CityLearn env exposed; a year of CityLearn at 128 sockets takes about 5 minutes per controller,
a year of the twin seconds. The twin is bit-equal to CityLearn (tests/envs/test_twin.py, both layouts
and objectives) and tests/control/test_twin_site.py checks that a controller scores the same on both,
so ``baselines --simulator twin`` gives CityLearn's numbers at a fraction of the time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch
from tensordict import TensorDict

from iquitos_lightning.envs.objectives import TARIFF, THESIS, tariff_bill
from iquitos_lightning.envs.state import SiteState
from iquitos_lightning.envs.twin import IquitosTwin


class TwinSite:
    """A B = 1 :class:`IquitosTwin` (``record=True``) with the CityLearn env's controller interface."""

    def __init__(self, twin: IquitosTwin) -> None:
        if twin.num_envs != 1 or not twin.record:
            raise ValueError("TwinSite needs a twin of one env built with record=True")
        self.twin = twin
        self.series = twin.series
        self.site_config = twin.site_config
        self.hours = twin.hours
        self.time_step = 0
        self._return = 0.0

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict]:
        observation = self.twin.reset()["observation"][0].numpy()
        self.time_step = 0
        self._return = 0.0
        return observation, {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        # float64 (the twin's own precision): a float32 action is the same number, a residual's float64 action
        # (control/residual.py) is not rounded on its way in
        tensor = torch.as_tensor(np.asarray(action, dtype=np.float64))[None]
        result = self.twin.step(TensorDict({"action": tensor}, batch_size=[1]))["next"]
        self.time_step += 1
        reward = float(result["reward"][0, 0])
        self._return += reward
        return result["observation"][0].numpy(), reward, bool(result["terminated"][0, 0]), False, {}

    def state(self) -> SiteState:
        tables, state = self.twin.tables, self.twin._state
        t = min(int(state.t[0]), self.hours - 1)  # the twin's own clock: also right when stepped past this wrapper
        connected = tables.connected[t]
        soc = state.soc[0].numpy().astype(np.float64)
        return SiteState(
            time_step=t,
            hour_of_day=int(tables.hour_of_step[t]),
            bess_soc=float(soc[0]),
            pv_kw=float(self.series.pv_kw[t]),
            mall_kw=float(self.series.mall_kw[t]),
            price_per_kwh=float(self.series.price_per_kwh[t]),
            socket_connected=connected.copy(),
            socket_soc=np.where(connected, soc[1:], 0.0),
            socket_required_soc=tables.required_soc[t].copy(),
            socket_hours_to_departure=tables.hours_to_departure[t].copy(),
            peak_to_date_kw=float(state.peak[0]),
        )

    def flows(self) -> pd.DataFrame:
        return self.twin.flows(0)

    def departures(self) -> pd.DataFrame:
        return self.twin.departures(0)

    def objective_returns(self) -> dict[str, float]:
        """The twin's own objective's return; the tariff bill (in -scale units) from the flows otherwise."""
        returns = {self.twin.objective: self._return}
        if self.twin.objective == THESIS:
            bill = tariff_bill(self.flows(), self.site_config, self.twin.tariff.weights)
            returns[TARIFF] = -bill["tariff_cost"] / self.twin.tariff.scale
        return returns
