"""The CityLearn 2022 challenge data in this repository, and the published protocol's three phases over it.

Why a copy in the package: CityLearn 3.0.2 downloads named datasets at first use, and nothing here may need the
network at run time (``dataset/README.md``: source, revision, license). Why the phases here: the published table
(dvoitekh/mpc-gap-citylearn, the paper "Decomposing the Model Predictive Control Performance Gap in Edge-Deployable
Building Energy Management") splits the public year in three, each its own CityLearn episode, and every controller
and agent of the benchmark is scored on exactly these rows.

Rows are the data rows of the CSVs (hour 0 = the first row). A phase's rows ``first..last`` are scored as CityLearn
2.2b0 scored them: its first row carries no battery action (2.2b0 applied an action to the row after the one it
observed), so a controller acts on rows ``first + 1..last`` knowing the data up to the row before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

DATASET = Path(__file__).resolve().parent / "dataset" / "citylearn_challenge_2022_phase_all"
SCHEMA = DATASET / "schema.json"
HOURS = 8_760
BATTERY_CAPACITY_KWH = 6.4  # every building's battery (schema.json)
BATTERY_POWER_KW = 5.0
PUBLISHED_PV_KW = 4.0  # what the published LP read for every building (its loader missed schema's attributes)


@dataclass(frozen=True)
class Phase:
    """One episode of the protocol: the buildings, the data rows ``first..last`` (inclusive) and its weight."""

    name: str
    buildings: tuple[int, ...]
    first: int
    last: int
    weight: float

    @property
    def hours(self) -> int:
        return self.last - self.first + 1

    @property
    def scored_hours(self) -> int:
        """The rows ``run_phase`` scores: all of them but the year's last (CityLearn 3.0.2 cannot simulate row 8759,
        simulation.py), so phase 3 scores 2,999 of its 3,000."""
        return min(self.last + 1, HOURS - 1) - self.first

    @property
    def building_names(self) -> list[str]:
        return [f"Building_{number}" for number in self.buildings]

    def shortened(self, hours: int) -> Phase:
        """The phase's first ``hours`` rows: a test or a pilot runs the protocol on a slice."""
        if not 2 <= hours <= self.hours:
            raise ValueError(f"a slice of {self.name} needs 2..{self.hours} hours, got {hours}")
        return Phase(self.name, self.buildings, self.first, self.first + hours - 1, self.weight)


PHASES: tuple[Phase, ...] = (
    Phase("phase 1", (1, 2, 3, 4, 5), 0, 24 * 120 - 1, 0.2),
    Phase("phase 2", (1, 2, 3, 4, 5), 24 * 120, 24 * 240 - 1, 0.3),
    Phase("phase 3", tuple(n for n in range(1, 18) if n not in (12, 15)), 24 * 240, HOURS - 1, 0.5),
)


@dataclass(frozen=True)
class ChallengeData:
    """The year's series as the controllers read them: per building load and PV (kWh per hour), price, carbon."""

    load: dict[int, np.ndarray]
    pv_per_kw: dict[int, np.ndarray]
    pv_kw: dict[int, float]
    price: np.ndarray
    carbon: np.ndarray

    def pv(self, building: int, pv_kw: float | None = None) -> np.ndarray:
        """The building's PV generation in kWh per hour: its true size, or ``pv_kw`` for every building."""
        return self.pv_per_kw[building] * (self.pv_kw[building] if pv_kw is None else pv_kw)

    def net_load(self, buildings: tuple[int, ...], rows: slice, pv_kw: float | None = None) -> np.ndarray:
        """Load minus PV (no battery), kWh, shape (buildings, rows)."""
        return np.stack([self.load[b][rows] - self.pv(b, pv_kw)[rows] for b in buildings])


def _column(path: Path, name: str) -> np.ndarray:
    with path.open() as file:
        header = file.readline().strip().split(",")
    index = header.index(name)
    return np.loadtxt(path, delimiter=",", skiprows=1, usecols=index, dtype=float)


@cache
def load_data() -> ChallengeData:
    """Every building's load and PV, the price and the carbon intensity, read once from the copy in the package.

    ``solar_generation`` is W per kW installed (CityLearn multiplies it by the PV's nominal power / 1000).
    """
    schema = json.loads(SCHEMA.read_text())
    load, pv_per_kw, pv_kw = {}, {}, {}
    for name, building in schema["buildings"].items():
        number = int(name.split("_")[1])
        path = DATASET / building["energy_simulation"]
        load[number] = _column(path, "non_shiftable_load")
        pv_per_kw[number] = _column(path, "solar_generation") / 1000.0
        pv_kw[number] = float(building["pv"]["attributes"]["nominal_power"])
    return ChallengeData(
        load=load,
        pv_per_kw=pv_per_kw,
        pv_kw=pv_kw,
        price=_column(DATASET / "pricing.csv", "electricity_pricing"),
        carbon=_column(DATASET / "carbon_intensity.csv", "carbon_intensity"),
    )
