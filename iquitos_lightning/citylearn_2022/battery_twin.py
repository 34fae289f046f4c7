"""CityLearn 3.0.2's battery, in numpy, for the buildings of the 2022 data: what an agent trains on, fast.

Why a twin: CityLearn steps one hour of one building in about a millisecond, in Python objects; an agent learning a
battery policy needs millions of building-hours, and the benchmark's scores must still come from CityLearn itself
(``simulation.run_phase``). This class replays ``citylearn.energy_model.Battery.charge`` (3.0.2) operation for
operation: the action is a fraction of the 5 kW nominal power; the power limit falls as the battery fills
(``capacity_power_curve``); the efficiency follows the power (``power_efficiency_curve``, evaluated twice as CityLearn
does) and enters as its square root on each side; the capacity degrades with the energy moved. Each building's two
curves are CityLearn's own: the 2022 schema leaves them to CityLearn's seeded draw, so they are read from a built env
(:func:`battery_curves`), not written down here. ``tests/citylearn_2022/test_battery_twin.py`` holds the twin's net
load equal to CityLearn's on random actions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from iquitos_lightning.citylearn_2022.dataset import BATTERY_CAPACITY_KWH, BATTERY_POWER_KW, SCHEMA

CAPACITY_LOSS = 1e-5  # the schema's capacity_loss_coefficient (the same for every building)


@dataclass(frozen=True)
class BatteryCurves:
    """One building's two battery curves (x, y), as CityLearn holds them."""

    power_efficiency: tuple[np.ndarray, np.ndarray]  # efficiency by power / nominal power
    capacity_power: tuple[np.ndarray, np.ndarray]  # power limit / nominal power by state of charge


@cache
def battery_curves() -> dict[int, BatteryCurves]:
    """Every building's curves, from CityLearn 3.0.2 built on the 2022 schema (seconds, once per process)."""
    from citylearn.citylearn import CityLearnEnv  # lazy: importing CityLearn costs seconds

    env = CityLearnEnv(str(SCHEMA), central_agent=True, simulation_start_time_step=0, simulation_end_time_step=2)
    curves = {}
    for building in env.buildings:
        storage = building.electrical_storage
        number = int(building.name.rsplit("_", 1)[1])
        efficiency, power = np.asarray(storage.power_efficiency_curve), np.asarray(storage.capacity_power_curve)
        curves[number] = BatteryCurves((efficiency[0], efficiency[1]), (power[0], power[1]))
    return curves


def _piecewise(x: float, curve: tuple[np.ndarray, np.ndarray]) -> float:
    """CityLearn's linear interpolation on a curve (its own index rule, which extrapolates past the ends)."""
    xs, ys = curve
    index = min(len(xs) - 2, max(0, int(np.searchsorted(xs, x, side="left")) - 1))
    return float(ys[index] + (ys[index + 1] - ys[index]) * (x - xs[index]) / (xs[index + 1] - xs[index]))


class BatteryTwin:
    """One building's battery: :meth:`charge` an action for one hour, get the energy it drew (+) or gave (-)."""

    def __init__(self, curves: BatteryCurves) -> None:
        self.curves = curves
        self.reset()

    def reset(self, soc: float = 0.0) -> None:
        """Empty (CityLearn's initial state: ``initial_soc`` 0) or at ``soc``, its capacity new."""
        self.energy = soc * BATTERY_CAPACITY_KWH
        self.degraded_capacity = BATTERY_CAPACITY_KWH

    @property
    def soc(self) -> float:
        return self.energy / BATTERY_CAPACITY_KWH

    def _efficiency(self, energy: float) -> float:
        power = min(max(abs(energy) / BATTERY_POWER_KW, 0.0), 1.0)
        return _piecewise(power, self.curves.power_efficiency)

    def charge(self, action: float) -> float:
        """Apply ``action`` (a fraction of the 5 kW, clipped to -1..1) for one hour; return the battery's electricity
        consumption, kWh: what it adds to the building's net load."""
        requested = float(np.clip(action, -1.0, 1.0)) * BATTERY_POWER_KW
        start = self.energy
        limit = max(BATTERY_POWER_KW * _piecewise(start / BATTERY_CAPACITY_KWH, self.curves.capacity_power), 0.0)
        if requested >= 0:
            energy = min(requested, limit)
            for _ in range(2):
                efficiency = self._efficiency(energy) ** 0.5
                energy = min(requested, limit, max(self.degraded_capacity - start, 0.0) / efficiency)
            final = min(start + energy * efficiency, BATTERY_CAPACITY_KWH)
        else:
            output = min(-requested, limit)
            for _ in range(2):
                efficiency = self._efficiency(output) ** 0.5
                output = min(-requested, limit, max(start, 0.0) * efficiency)
            final = max(0.0, start - output / efficiency)
        delta = final - start
        balance = delta / efficiency if delta >= 0 else delta * efficiency
        lost = CAPACITY_LOSS * BATTERY_CAPACITY_KWH * abs(balance) / (2 * self.degraded_capacity)
        self.degraded_capacity = max(self.degraded_capacity - lost, 0.0)
        self.energy = final
        return balance
