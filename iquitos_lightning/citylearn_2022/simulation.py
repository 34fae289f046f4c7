"""A controller over one phase in CityLearn 3.0.2, offline, scored as the published table scores it.

Why CityLearn and not the LP's model: CityLearn's battery is not an LP's battery (its power falls as it fills, its
efficiency depends on the power), so a plan is only as good as what CityLearn makes of it. Why the rows are shifted:
CityLearn 2.2b0, which the published rows ran on, applied an action to the row after the one its agent observed,
while 3.0.2 applies it to the row it observed. Here a controller always acts on a row knowing the data up to the row
before (2.2b0's information), the phase's first row carries no action (as in 2.2b0), and the KPIs are computed from
CityLearn's per-building series with 2.2b0's definitions (``scoring.py``). CityLearn 3.0.2 simulates the rows before
its ``simulation_end_time_step``, so the episode is built one row longer; the year's last row (8759, the end of phase
3) cannot be, and phase 3 is scored on its first 2,999 rows (2.2b0 scored 3,000).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from iquitos_lightning.citylearn_2022.dataset import HOURS, SCHEMA, Phase, load_data
from iquitos_lightning.citylearn_2022.scoring import ChallengeScore, score_challenge


class Controller(Protocol):
    """What the protocol runs: one battery action per building for each row, from what was known the row before."""

    def start(self, phase: Phase, env: Any) -> None:
        """Called once the phase's CityLearn env is built and reset, before the first row."""

    def act(self, row: int, observation: list[float], soc: np.ndarray) -> np.ndarray:
        """CityLearn 3 actions (fraction of each battery's 5 kW, in -1..1) for data row ``row``, given CityLearn's
        central observation of row ``row - 1`` and every battery's state of charge after it."""


@dataclass(frozen=True)
class PhaseRun:
    """What one controller did on one phase: the score, CityLearn's series it came from, and the seconds it took."""

    phase: Phase
    score: ChallengeScore
    control: np.ndarray  # net consumption per building, kWh (buildings, scored rows)
    baseline: np.ndarray  # the same without storage
    seconds: float


def make_env(phase: Phase) -> Any:
    """CityLearn's central-agent env for ``phase``, read from the copy in the package (nothing downloads)."""
    from citylearn.citylearn import CityLearnEnv  # lazy: importing CityLearn costs seconds

    return CityLearnEnv(
        str(SCHEMA),
        central_agent=True,
        buildings=phase.building_names,
        simulation_start_time_step=phase.first,
        simulation_end_time_step=min(phase.last + 1, HOURS - 1),
    )


def battery_soc(env: Any) -> np.ndarray:
    return np.array([building.electrical_storage.soc[building.time_step - 1] for building in env.buildings])


def run_phase(controller: Controller, phase: Phase) -> PhaseRun:
    """``controller`` on ``phase`` in CityLearn, scored on the rows CityLearn simulated."""
    started = time.perf_counter()
    env = make_env(phase)
    current, _ = env.reset()  # CityLearn 3's observation of the row about to be simulated
    before = current
    controller.start(phase, env)
    buildings = len(phase.buildings)
    row = phase.first
    while not env.terminated:
        if row == phase.first:
            action = np.zeros(buildings)
        else:  # the observation of the row before: 2.2b0's information
            action = np.clip(np.asarray(controller.act(row, before[0], battery_soc(env)), float), -1.0, 1.0)
        before = current
        current, _, _, _, _ = env.step([action.tolist()])
        row += 1
    scored = slice(phase.first, row)
    control = np.stack([np.asarray(b.net_electricity_consumption, float)[: row - phase.first] for b in env.buildings])
    baseline = np.stack(
        [np.asarray(b.net_electricity_consumption_without_storage, float)[: row - phase.first] for b in env.buildings]
    )
    data = load_data()
    result = score_challenge(control, baseline, data.price[scored], data.carbon[scored])
    return PhaseRun(phase, result, control, baseline, time.perf_counter() - started)
