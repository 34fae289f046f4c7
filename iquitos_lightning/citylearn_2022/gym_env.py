"""A Gymnasium env over CityLearn 3.0.2 on the 2022 challenge data, for the project's agents to train on.

Why an env of our own and not CityLearn's gym wrapper: the benchmark's controllers act under CityLearn 2.2b0's
information rule (``simulation.py``): the action for data row ``r`` is chosen knowing only the data up to row ``r - 1``.
CityLearn 3.0.2's own observation of row ``r`` already holds row ``r``'s load and PV, so an agent trained on it would
learn from information it never has in :func:`~iquitos_lightning.citylearn_2022.simulation.run_phase`. Here CityLearn
simulates the batteries (its power curve and efficiencies, which a plan must live with), while the observation is
built by :class:`ObservationBuilder` from the dataset's arrays up to row ``r - 1`` and the batteries' state after it:
the same builder the trained policy's :class:`~iquitos_lightning.experiments.citylearn_2022_agents.PolicyController`
uses inside ``run_phase``, so training and scoring see the same numbers (``tests/citylearn_2022``).

An episode over rows ``s..s + hours - 1``: reset simulates row ``s`` with the batteries idle (as ``run_phase`` does
with a phase's first row), then step ``k`` applies its action to row ``s + k + 1`` and returns the observation for
row ``s + k + 2``; ``info["row"]`` names the row the action went to. Training episodes are random windows inside the
env's rows, drawn from ``reset(seed)``'s generator.

Which rows and buildings an agent may train on (no agent trains on a (building, row) pair it is scored on):

- ``CityLearn2022FiveBuildings-v0``: buildings 6-10 over rows 0-5759, for the agent scored on buildings 1-5 in
  phases 1 and 2 (the same days, other buildings).
- ``CityLearn2022PhaseThree-v0``: phase 3's fifteen buildings over rows 0-5759, for the agent scored on rows
  5760-8759 (the same buildings, the days before).

``gymnasium.make("iquitos_lightning.citylearn_2022.gym_env:CityLearn2022FiveBuildings-v0")`` imports this module,
which registers both ids (``EnvConfig(name=...)`` takes the same string).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from iquitos_lightning.citylearn_2022.controllers import self_consumption_action
from iquitos_lightning.citylearn_2022.dataset import BATTERY_POWER_KW, HOURS, SCHEMA, load_data
from iquitos_lightning.citylearn_2022.scoring import HOURS_PER_DAY, peak, ramping

TRAIN_ROWS = (0, 24 * 240 - 1)  # rows 0-5759: phases 1 and 2, the days before phase 3
FIVE_TRAINING_BUILDINGS = (6, 7, 8, 9, 10)  # the 5-building agent's: phases 1-2 score buildings 1-5 on these rows
PHASE_THREE_BUILDINGS = tuple(n for n in range(1, 18) if n not in (12, 15))
WINDOW_HOURS = 720  # a training episode: 30 days, long enough for the daily cycle, short enough to vary the season
PRICE_SCALE = 0.5  # the tariff's top rate is 0.54: prices enter the observation about in 0..1
CARBON_SCALE = 0.2  # carbon intensity runs 0.07..0.28 kg/kWh
PRICE_AHEAD = 3  # the price of rows r..r + 2: the tariff is a published schedule (ObservationBuilder)
RELATIVE_REWARD_SCALE = 1.0  # random batteries: about -7 +- 15 an hour; covering the last hour: +1.8 +- 5 (x 10 scale)
ID_PREFIX = "iquitos_lightning.citylearn_2022.gym_env:"
FIVE_BUILDINGS_ID = "CityLearn2022FiveBuildings-v0"
PHASE_THREE_ID = "CityLearn2022PhaseThree-v0"
RELATIVE_SUFFIX = "Relative"  # the ids with the reward relative to no battery (CityLearn2022FiveBuildingsRelative-v0)
RESIDUAL_SUFFIX = "ResidualRelative"  # relative reward, the agent acting around the self-consumption rule


class LastHour:
    """The last simulated row's net load and the day's peak so far, for the district (one number) or per building
    (an array): what an observation of the next row and the hourly reward read, kept the same way for both envs'
    builders (:class:`ObservationBuilder`, ``building_env.BuildingObservation``)."""

    def __init__(self, count: int | None = None) -> None:
        self.shape = () if count is None else (count,)
        self.reset()

    def reset(self) -> None:
        """Forget the last episode: no row recorded, no day peak."""
        self.row = -1
        self.net = np.zeros(self.shape)
        self.day_peak = np.zeros(self.shape)

    def record(self, row: int, net: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Note row ``row``'s net load once simulated; return the previous row's and the day's peak before this row."""
        net = np.asarray(net, float)
        previous = self.net if self.row >= 0 else net
        if self.row < 0 or row // HOURS_PER_DAY != self.row // HOURS_PER_DAY:
            self.day_peak = np.zeros_like(net)  # a new block of the daily KPIs (blocks from row 0)
        peak_before = self.day_peak
        self.day_peak = np.maximum(self.day_peak, net)
        self.row, self.net = row, net
        return previous, peak_before

    def day_peak_for(self, row: int) -> np.ndarray:
        """The day's peak an observation of row ``row`` sees (0 when ``row`` starts a day); ``row - 1`` recorded
        last."""
        if self.row != row - 1:
            raise ValueError(f"observation for row {row} needs row {row - 1} recorded last, got {self.row}")
        return self.day_peak if row // HOURS_PER_DAY == (row - 1) // HOURS_PER_DAY else np.zeros_like(self.day_peak)


class ObservationBuilder:
    """The observation for data row ``r`` from what is known at ``r - 1``: the env's and the scored policy's.

    Why these entries (all about in -2..2, so no running normaliser is needed and a policy trained on some buildings
    reads others the same way): the hour of row ``r`` as sin/cos (the load, PV and tariff follow the day); per
    building its net load without battery of row ``r - 1`` and of row ``r - 24`` (the same hour yesterday: the
    cheapest forecast of row ``r``) in units of the battery's 5 kW, and its state of charge; the district's net
    load with batteries of row ``r - 1`` (the ramp term's reference) and the day's peak so far (the daily peak term's
    reference), per building and in the same unit; the price of rows ``r - 1..r + 2`` and the carbon intensity of
    ``r - 1``. Why the price ahead but not the carbon: the price is a time-of-use schedule known in advance (CityLearn's
    own observation of row ``r - 1`` carries its exact values at rows ``r + 5``, ``r + 11`` and ``r + 23``; the rows
    just ahead are the ones an hourly action needs), while CityLearn gives no carbon forecast. Nothing reads the load,
    PV or carbon of row ``r`` or later.
    """

    def __init__(self, buildings: tuple[int, ...]) -> None:
        data = load_data()
        self.buildings = buildings
        self.net = data.net_load(buildings, slice(0, HOURS))
        self.price, self.carbon = data.price, data.carbon
        self.size = 2 + 3 * len(buildings) + 2 + (PRICE_AHEAD + 1) + 1
        self.reset()

    def reset(self) -> None:
        """Forget the last episode: no row recorded, no day peak."""
        self.last = LastHour()

    def record(self, row: int, net_with_battery: np.ndarray) -> tuple[float, float]:
        """Note row ``row``'s net consumption per building (with batteries) once simulated; return the district's
        previous net load and the day's peak before this row (what the hourly reward compares with)."""
        previous, peak_before = self.last.record(row, np.sum(net_with_battery))
        return float(previous), float(peak_before)

    def observe(self, row: int, soc: np.ndarray) -> np.ndarray:
        """The observation for row ``row``: the data up to ``row - 1`` (recorded last) and ``soc`` after it."""
        day_peak = float(self.last.day_peak_for(row))
        known = row - 1
        buildings = len(self.buildings)
        hour = 2 * np.pi * (row % HOURS_PER_DAY) / HOURS_PER_DAY
        ahead = np.minimum(np.arange(known, known + PRICE_AHEAD + 1), HOURS - 1)
        parts = [
            [np.sin(hour), np.cos(hour)],
            self.net[:, known] / BATTERY_POWER_KW,
            self.net[:, max(row - HOURS_PER_DAY, 0)] / BATTERY_POWER_KW,
            np.asarray(soc, float),
            [float(self.last.net) / (BATTERY_POWER_KW * buildings), day_peak / (BATTERY_POWER_KW * buildings)],
            self.price[ahead] / PRICE_SCALE,
            [self.carbon[known] / CARBON_SCALE],
        ]
        return np.concatenate([np.asarray(part, float) for part in parts]).astype(np.float32)


@dataclass(frozen=True)
class RewardScales:
    """The no-battery hourly means the reward's terms are divided by, from the env's own (training) rows.

    Why per term and per building: the score is a mean of ratios to the no-battery run (cost and emissions per
    building, then averaged), so each term weighs in the reward as it weighs in the score."""

    cost: np.ndarray  # per building: mean over rows of max(net * price, 0)
    emissions: np.ndarray  # per building: the same with carbon
    ramp: float  # mean upward step of the district
    daily_peak: float  # mean over day blocks of the block's district max

    @classmethod
    def of(cls, buildings: tuple[int, ...], first: int, last: int) -> RewardScales:
        data = load_data()
        rows = slice(first, last + 1)
        net = data.net_load(buildings, rows)
        district = net.sum(axis=0)
        return cls(
            cost=np.maximum(net * data.price[rows], 0.0).mean(axis=1),
            emissions=np.maximum(net * data.carbon[rows], 0.0).mean(axis=1),
            ramp=ramping(district) / (district.size - 1),
            daily_peak=peak(district, HOURS_PER_DAY),
        )


def hourly_reward(
    scales: RewardScales,
    net: np.ndarray,
    price: float,
    carbon: float,
    previous_district: float,
    day_peak_before: float,
) -> float:
    """Minus an hourly surrogate of the score: about -1 per hour with idle batteries, higher is better.

    (cost + emissions + grid) / 3 with cost and emissions this hour's per-building bills over their no-battery
    means (averaged over buildings, as the score averages ratios), and grid = (ramp + 3 x peak) / 4: the upward step
    of the district over its mean, and the rise of the day's peak (x 24, so that a day's rises sum to its peak over
    the mean daily peak). Why the peak thrice: the daily peak, the daily 1 - load factor (its mean is about fixed,
    so it falls only with the peak) and the all-time peak (a window's max, too sparse per hour) all fall with peaks.
    """
    district = float(net.sum())
    cost = float(np.mean(np.maximum(net * price, 0.0) / scales.cost))
    emissions = float(np.mean(np.maximum(net * carbon, 0.0) / scales.emissions))
    ramp = max(district - previous_district, 0.0) / scales.ramp
    peak_rise = HOURS_PER_DAY * max(district - max(day_peak_before, 0.0), 0.0) / scales.daily_peak
    return -(cost + emissions + (ramp + 3.0 * peak_rise) / 4.0) / 3.0


class CityLearnChallengeEnv(gym.Env):
    """CityLearn 3.0.2's central agent over ``buildings`` and rows ``first..last``, one step behind (module docstring).

    ``window_hours``: the rows of a training episode, a random window inside ``first..last``; None runs the whole
    range from ``first`` every episode. Actions: one per building, CityLearn 3's fraction of the battery's 5 kW.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        buildings: tuple[int, ...] = FIVE_TRAINING_BUILDINGS,
        first: int = TRAIN_ROWS[0],
        last: int = TRAIN_ROWS[1],
        window_hours: int | None = WINDOW_HOURS,
        relative_reward: bool = False,
        residual: bool = False,
    ) -> None:
        from citylearn.citylearn import CityLearnEnv  # lazy: importing CityLearn costs seconds

        # CityLearn 3.0.2 simulates the rows before its end step, and its data end at row 8759
        self.end = min(last + 1, HOURS - 1)
        self.hours = self.end - first if window_hours is None else window_hours
        if not 2 <= self.hours <= self.end - first:
            raise ValueError(f"window of {window_hours} hours does not fit rows {first}..{self.end - 1}")
        self.buildings, self.first = tuple(buildings), first
        self.citylearn = CityLearnEnv(
            str(SCHEMA),
            central_agent=True,
            buildings=[f"Building_{number}" for number in self.buildings],
            simulation_start_time_step=first,
            simulation_end_time_step=self.end,
        )
        self.observer = ObservationBuilder(self.buildings)
        self.scales = RewardScales.of(self.buildings, first, self.end - 1)
        # relative_reward: the hour's reward minus the same buildings' without a battery (their own ramp and day peak
        # kept apart), x RELATIVE_REWARD_SCALE. Why: the load and PV move the absolute reward far more than any battery
        # can (SAC's and PPO's evaluation returns stayed flat on it); what is left is the battery's own effect, which
        # is also what the score's ratios to the no-battery run measure.
        self.relative_reward = relative_reward
        # residual: the agent's action is added to the self-consumption rule's (controllers.SelfConsumptionRule: store
        # the hour before's surplus, cover its import), so 0 is that rule, not an idle battery. Why: the rule alone
        # scores 0.88-0.89 on phases 1-2; the agent learns what to do differently (time the tariff, shave the peaks).
        self.residual = residual
        self.without_battery = ObservationBuilder(self.buildings)
        self.net_without = self.observer.net  # the year's net load without battery, per building (kWh)
        data = load_data()
        self.price, self.carbon = data.price, data.carbon
        count = len(self.buildings)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (self.observer.size,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (count,), np.float32)
        self.start = first
        self.row = first

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.start = self.first + int(self.np_random.integers(0, self.end - self.hours - self.first + 1))
        self.citylearn.episode_time_steps = [(self.start, self.start + self.hours)]
        self.citylearn.reset()
        self.observer.reset()
        self.without_battery.reset()
        self.row = self.start
        self._simulate(np.zeros(len(self.buildings)))  # the window's first row: batteries idle, as in run_phase
        return self.observer.observe(self.row, self._soc()), {"start": self.start}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        row = self.row
        applied = np.asarray(action, float) + (self_consumption_action(self.net_without, row) if self.residual else 0.0)
        net, previous, peak_before = self._simulate(np.clip(applied, -1.0, 1.0))
        reward = hourly_reward(self.scales, net, self.price[row], self.carbon[row], previous, peak_before)
        if self.relative_reward:
            idle = self.net_without[:, row]
            idle_previous, idle_peak = self.without_battery.record(row, idle)
            idle_reward = hourly_reward(self.scales, idle, self.price[row], self.carbon[row], idle_previous, idle_peak)
            reward = RELATIVE_REWARD_SCALE * (reward - idle_reward)
        truncated = bool(self.citylearn.terminated)  # the window's end: time ran out, the task goes on
        return self.observer.observe(self.row, self._soc()), reward, False, truncated, {"row": row}

    def _simulate(self, action: np.ndarray) -> tuple[np.ndarray, float, float]:
        """Apply ``action`` to row ``self.row`` in CityLearn, record the row and move to the next."""
        self.citylearn.step([action.tolist()])
        index = self.row - self.start
        net = np.array([b.net_electricity_consumption[index] for b in self.citylearn.buildings], float)
        previous, peak_before = self.observer.record(self.row, net)
        if self.relative_reward and self.row == self.start:  # the idle first row: both runs are the same
            self.without_battery.record(self.row, self.net_without[:, self.row])
        self.row += 1
        return net, previous, peak_before

    def _soc(self) -> np.ndarray:
        """Every battery's state of charge after the last simulated row (``run_phase``'s ``battery_soc``, which reads
        CityLearn's clock; CityLearn's clock stops at an episode's last row, the row count does not)."""
        index = self.row - 1 - self.start
        return np.array([b.electrical_storage.soc[index] for b in self.citylearn.buildings], float)


def _register() -> None:
    """The training ids (module docstring), each truncated at the window's last step."""
    ids = {
        FIVE_BUILDINGS_ID: {"buildings": FIVE_TRAINING_BUILDINGS},
        PHASE_THREE_ID: {"buildings": PHASE_THREE_BUILDINGS},
    }
    variants = {"": {}, RELATIVE_SUFFIX: {"relative_reward": True},
                RESIDUAL_SUFFIX: {"relative_reward": True, "residual": True}}  # fmt: skip
    for env_id, kwargs in ids.items():
        for suffix, options in variants.items():
            name = env_id.replace("-v0", f"{suffix}-v0")
            if name not in gym.registry:
                gym.register(
                    name,
                    entry_point=f"{__name__}:CityLearnChallengeEnv",
                    max_episode_steps=WINDOW_HOURS - 1,
                    kwargs={**kwargs, "first": TRAIN_ROWS[0], "last": TRAIN_ROWS[1], "window_hours": WINDOW_HOURS,
                            **options},
                )  # fmt: skip


_register()
