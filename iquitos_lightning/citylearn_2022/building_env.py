"""One building's battery as a Gymnasium env on the battery twin: the shared per-building policy's training ground.

Why one building and not the district (``gym_env.py``'s central agent): the three phases score 5 and 15 buildings,
the central agent's observation and action grow with them, so a central agent needs one training per phase layout,
and each learns from one CityLearn step per district-hour. A policy of one building's own observation acts in any
building of any phase (``PolicyController(per_building=True)`` plays it on every battery in ``run_phase``), so one
training covers the whole benchmark; and on :class:`~iquitos_lightning.citylearn_2022.battery_twin.BatteryTwin` it
steps 5-6 times more building-hours per CPU second than the central env on CityLearn (6.1-6.3 k against 1.0-1.2 k,
random actions, alternating in one process). What it gives up: a building does not see the district, so the score's
district terms (ramping, the peaks) are learned through the building's own; the district's upward ramp and peak are
at most the sum of its buildings', so flattening each flattens the sum, but no building can time itself against
the others.

Which data it trains on: buildings 6-17 over rows 0-5759. Phases 1 and 2 score buildings 1-5 on those rows, phase 3
scores rows 5760-8759; no (building, row) pair it is scored on is trained on. An episode is a random 30-day window of
one random training building; its first row runs idle and step ``k`` applies the action to the window's row ``k + 1``
(``gym_env.py``'s order, ``run_phase``'s). The battery starts each window at a random state of charge (a phase starts
it empty): from empty, every exploring charge costs at once and pays only hours later, and PPO's first pilot settled
on discharging an empty battery (an idle one, return exactly 0) within 65,536 frames; a battery that starts charged
shows what discharging it in the dear hours is worth before the policy has learnt to fill it.

The observation of row ``r`` (:class:`BuildingObservation`) holds only the data up to ``r - 1``, as every controller's
in ``run_phase``. The reward is relative to the same building without battery, so an idle battery earns 0
(``gym_env.py``'s ``relative_reward``): ``"surrogate"`` the central env's hourly score surrogate on one building
(:func:`~iquitos_lightning.citylearn_2022.gym_env.hourly_reward`: cost, emissions, the upward ramp and the rise of
the day's peak); ``"quadratic"`` the same cost and emissions with the grid term the squared import over its
no-battery mean (:func:`quadratic_reward`). ``CityLearn2022BuildingResidual-v0`` acts around the
self-consumption rule (its action added to the rule's, 0 is the rule), a row the benchmark page labels as such.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from iquitos_lightning.citylearn_2022.battery_twin import BatteryTwin, battery_curves
from iquitos_lightning.citylearn_2022.controllers import self_consumption_action
from iquitos_lightning.citylearn_2022.dataset import BATTERY_POWER_KW, HOURS, load_data
from iquitos_lightning.citylearn_2022.gym_env import (
    CARBON_SCALE,
    PRICE_AHEAD,
    PRICE_SCALE,
    TRAIN_ROWS,
    WINDOW_HOURS,
    LastHour,
    RewardScales,
    hourly_reward,
)
from iquitos_lightning.citylearn_2022.scoring import HOURS_PER_DAY

TRAINING_BUILDINGS = tuple(range(6, 18))  # buildings 6-17: none of phases 1-2's; phase 3 is scored on later rows
BUILDING_ID = "CityLearn2022Building-v0"
BUILDING_RESIDUAL_ID = "CityLearn2022BuildingResidual-v0"
BUILDING_QUADRATIC_RESIDUAL_ID = "CityLearn2022BuildingQuadraticResidual-v0"
REWARDS = ("surrogate", "quadratic")


def quadratic_reward(cost_scale: float, emissions_scale: float, import_scale: float, net: float, price: float,
                     carbon: float) -> float:  # fmt: skip
    """Minus (cost + emissions + squared import) / 3 for one building-hour, each over its no-battery hourly mean.

    Why a square for the grid: the score's grid terms (ramping, load factor, daily and all-time peaks) are district
    properties of whole days and phases that one building's hour can only move a little and no hour can see; the
    surrogate's rise of the day's peak turns that into rare large penalties (x 24) on the hours a peak happens to
    rise. A squared import prices every hour's flattening smoothly, the form an LP or MPC uses for peaks. On PPO
    around the self-consumption rule, one seed at 98,304 frames: 0.856 weighted against the surrogate's 0.887 at
    163,840.
    """
    imported = max(net, 0.0)
    return -(imported * price / cost_scale + imported * carbon / emissions_scale + imported**2 / import_scale) / 3.0


class BuildingObservation:
    """Each building's observation of data row ``r`` from what is known at ``r - 1``: the twin env's (one building)
    and the scored policy's (every building of a phase), so both see the same numbers.

    Per building, all about in -2..2 (no running normaliser, and a policy reads any building the same way): the hour
    of row ``r`` as sin/cos; the net load without battery of row ``r - 1`` and of ``r - 24`` (the same hour
    yesterday), in units of the battery's 5 kW; the state of charge; the net load with battery of ``r - 1`` and the
    day's peak so far (the reward's ramp and peak references), in the same unit; the price of rows ``r - 1..r + 2``
    (a published time-of-use schedule) and the carbon intensity of ``r - 1``.
    """

    size = 2 + 2 + 1 + 2 + (PRICE_AHEAD + 1) + 1

    def __init__(self, buildings: tuple[int, ...]) -> None:
        data = load_data()
        self.net = data.net_load(buildings, slice(0, HOURS))  # without battery, (buildings, hours)
        self.price, self.carbon = data.price, data.carbon
        self.reset()

    def reset(self) -> None:
        """Forget the last episode: no row recorded, no day peak."""
        self.last = LastHour(self.net.shape[0])

    def record(self, row: int, net_with_battery: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Note row ``row``'s net consumption per building once simulated; return each building's previous net load
        and its day's peak before this row (the hourly reward's references)."""
        return self.last.record(row, net_with_battery)

    def observe(self, row: int, soc: np.ndarray) -> np.ndarray:
        """(buildings, :attr:`size`): the observation for row ``row``, the data up to ``row - 1`` recorded last."""
        day_peak = self.last.day_peak_for(row)
        known = row - 1
        count = self.net.shape[0]
        hour = 2 * np.pi * (row % HOURS_PER_DAY) / HOURS_PER_DAY
        ahead = np.minimum(np.arange(known, known + PRICE_AHEAD + 1), HOURS - 1)
        columns = [
            np.full(count, np.sin(hour)),
            np.full(count, np.cos(hour)),
            self.net[:, known] / BATTERY_POWER_KW,
            self.net[:, max(row - HOURS_PER_DAY, 0)] / BATTERY_POWER_KW,
            np.asarray(soc, float),
            self.last.net / BATTERY_POWER_KW,
            day_peak / BATTERY_POWER_KW,
            *[np.full(count, price / PRICE_SCALE) for price in self.price[ahead]],
            np.full(count, self.carbon[known] / CARBON_SCALE),
        ]
        return np.stack(columns, axis=1).astype(np.float32)


class BuildingBatteryEnv(gym.Env):
    """One random training building's battery on the twin, over random windows of rows ``first..last`` (module
    docstring). Action: the battery's fraction of its 5 kW (CityLearn 3's), added to the self-consumption rule's
    when ``residual``."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        buildings: tuple[int, ...] = TRAINING_BUILDINGS,
        first: int = TRAIN_ROWS[0],
        last: int = TRAIN_ROWS[1],
        window_hours: int = WINDOW_HOURS,
        residual: bool = False,
        random_initial_soc: bool = True,
        reward: str = "surrogate",
    ) -> None:
        if reward not in REWARDS:
            raise ValueError(f"reward {reward!r}: use one of {REWARDS}")
        if not 2 <= window_hours <= last + 1 - first:
            raise ValueError(f"window of {window_hours} hours does not fit rows {first}..{last}")
        curves = battery_curves()
        self.buildings, self.first, self.last, self.hours = tuple(buildings), first, last, window_hours
        self.residual, self.random_initial_soc = residual, random_initial_soc
        self.twins = [BatteryTwin(curves[number]) for number in self.buildings]
        self.observers = [BuildingObservation((number,)) for number in self.buildings]
        self.idle_observers = [BuildingObservation((number,)) for number in self.buildings]
        self.scales = [RewardScales.of((number,), first, last) for number in self.buildings]
        self.reward = reward
        data = load_data()
        without = data.net_load(self.buildings, slice(first, last + 1))
        self.import_scales = np.mean(np.maximum(without, 0.0) ** 2, axis=1)  # per building, kWh^2
        self.price, self.carbon = data.price, data.carbon
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (BuildingObservation.size,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.index, self.start, self.row = 0, first, first

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.index = int(self.np_random.integers(len(self.buildings)))
        self.start = self.first + int(self.np_random.integers(0, self.last + 2 - self.hours - self.first))
        self.twins[self.index].reset(float(self.np_random.uniform()) if self.random_initial_soc else 0.0)
        self.observers[self.index].reset()
        self.idle_observers[self.index].reset()
        self.row = self.start
        idle = self.observers[self.index].net[:, self.row]
        self.observers[self.index].record(self.row, idle)  # the window's first row: the battery idle, as in run_phase
        self.idle_observers[self.index].record(self.row, idle)
        self.row += 1
        return self._observe(), {"start": self.start, "building": self.buildings[self.index]}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        row, observer = self.row, self.observers[self.index]
        idle = observer.net[:, row]
        rule = self_consumption_action(observer.net, row) if self.residual else 0.0
        applied = float(np.clip(np.asarray(action, float).reshape(-1)[0] + rule, -1.0, 1.0).item())
        net = idle + self.twins[self.index].charge(applied)
        reward = self._reward(row, net, observer) - self._reward(row, idle, self.idle_observers[self.index])
        self.row += 1
        truncated = self.row >= self.start + self.hours
        return self._observe(), reward, False, truncated, {"row": row, "net": float(net[0])}

    def _reward(self, row: int, net: np.ndarray, observer: BuildingObservation) -> float:
        previous, peak_before = observer.record(row, net)
        scales = self.scales[self.index]
        price, carbon = self.price[row], self.carbon[row]
        if self.reward == "quadratic":
            scale = self.import_scales[self.index]
            return quadratic_reward(scales.cost[0], scales.emissions[0], scale, float(net[0]), price, carbon)
        return hourly_reward(scales, net, price, carbon, float(previous[0]), float(peak_before[0]))

    def _observe(self) -> np.ndarray:
        return self.observers[self.index].observe(self.row, np.array([self.twins[self.index].soc]))[0]


def _register() -> None:
    """The training ids (module docstring), each truncated at the window's last step."""
    ids = {
        BUILDING_ID: {"residual": False},
        BUILDING_RESIDUAL_ID: {"residual": True},
        BUILDING_QUADRATIC_RESIDUAL_ID: {"residual": True, "reward": "quadratic"},
    }
    for name, kwargs in ids.items():
        if name not in gym.registry:
            gym.register(
                name, entry_point=f"{__name__}:BuildingBatteryEnv", max_episode_steps=WINDOW_HOURS - 1, kwargs=kwargs
            )


_register()
