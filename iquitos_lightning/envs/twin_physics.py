"""CityLearn 3.0.2's battery and charger models, vectorised over tensors, read from the site's schema.

Why a transcription and not a model of our own: the twin must reproduce CityLearn step for step,
so every formula below follows ``citylearn/energy_model.py`` (``Battery.charge``,
``StorageDevice._charge``, ``get_max_input_power``, ``get_current_efficiency``,
``StorageDevice.next_time_step``) and ``citylearn/electric_vehicle_charger.py``
(``Charger.update_connected_electric_vehicle_soc``) operation by operation, in float64, with a
rounding to float32 wherever CityLearn stores a value in one of its float32 arrays. CityLearn's
odd bits are kept on purpose and named where they happen:

- SOC, energy balance and electricity consumption live in float32 arrays (``_f32`` below);
  the next step starts from the rounded value, so the rounding is part of the dynamics;
- ``efficiency`` is the ROUND TRIP: each way uses ``efficiency ** 0.5``;
- the power-efficiency curve is evaluated twice per charge (a fixed point of two iterations),
  and the second efficiency is the one used for the SOC update even though the energy it
  limits came out of the second iteration;
- the capacity-power curve is read at the SOC at the start of the step;
- the charging limit uses the degraded capacity, the discharging limit the nominal capacity
  times ``1 - depth_of_discharge``;
- standby loss is applied when the step advances (``soc * (1 - loss)`` clipped to
  ``[1 - depth_of_discharge, 1]``), so an observation of "the SOC at the end of the last step"
  is the value before that loss.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from iquitos_lightning.site.build import BUILDING_NAME, charger_id, ev_name

ZERO_DIVISION_PLACEHOLDER = 1e-6  # citylearn.data.ZERO_DIVISION_PLACEHOLDER
SECONDS_PER_HOUR = 3600.0


def _python_sqrt(values: torch.Tensor) -> torch.Tensor:
    """``x ** 0.5`` as Python computes it (C ``pow``): torch's ``pow(x, 0.5)`` is ``sqrt``, which
    differs from it in the last bit for about 2 % of inputs. Used where the input is a constant."""
    return torch.tensor([value**0.5 for value in values.tolist()], dtype=torch.float64, device=values.device)


def _f32(values: torch.Tensor) -> torch.Tensor:
    """Round float64 values to float32 and back: what storing them in a CityLearn float32 array does."""
    return values.to(torch.float32).to(torch.float64)


@dataclass
class PiecewiseCurve:
    """A CityLearn curve ``[[x0, y0], [x1, y1], ...]`` for N devices: ``x``, ``y`` are [N, K] float64."""

    x: torch.Tensor
    y: torch.Tensor

    def __post_init__(self) -> None:
        # Flat (every y equal): CityLearn's interpolation y0 + (v - x0) x 0 / dx returns y0 exactly.
        self.flat = bool((self.y == self.y[..., :1]).all())

    def __call__(self, value: torch.Tensor) -> torch.Tensor:
        """CityLearn's interpolation (``searchsorted(side='left') - 1`` clipped to a segment; extrapolates)."""
        if self.flat:
            return self.y[..., 0].expand_as(value)
        segments = self.x.shape[-1] - 1
        index = ((self.x < value[..., None]).sum(-1) - 1).clamp(0, segments - 1)
        x0 = torch.gather(self.x.expand(*value.shape, -1), -1, index[..., None])[..., 0]
        x1 = torch.gather(self.x.expand(*value.shape, -1), -1, index[..., None] + 1)[..., 0]
        y0 = torch.gather(self.y.expand(*value.shape, -1), -1, index[..., None])[..., 0]
        y1 = torch.gather(self.y.expand(*value.shape, -1), -1, index[..., None] + 1)[..., 0]
        return y0 + (value - x0) * (y1 - y0) / (x1 - x0)


@dataclass
class BatteryModel:
    """N CityLearn ``Battery`` objects with their schema attributes as [N] float64 tensors."""

    capacity: torch.Tensor
    nominal_power: torch.Tensor
    depth_of_discharge: torch.Tensor
    loss_coefficient: torch.Tensor
    capacity_loss_coefficient: torch.Tensor
    initial_soc: torch.Tensor
    power_efficiency_curve: PiecewiseCurve
    capacity_power_curve: PiecewiseCurve

    def __post_init__(self) -> None:
        # One-way efficiency of a flat power-efficiency curve, rounded as CityLearn's Python pow does.
        self.flat_round_trip = _python_sqrt(self.power_efficiency_curve.y[..., 0])
        self.has_fade = bool((self.capacity_loss_coefficient != 0).any())
        # Battery._minimum_soc: clip(1 - depth_of_discharge, 0, 1).
        self.minimum_soc = (1.0 - self.depth_of_discharge).clamp(0.0, 1.0)

    @property
    def start_soc(self) -> torch.Tensor:
        """SOC at time step 0 after ``reset``: max(initial_soc, minimum SOC), stored as float32."""
        return _f32(torch.maximum(self.initial_soc, self.minimum_soc))

    @classmethod
    def from_attributes(cls, attributes: list[dict[str, Any]], device: torch.device | str = "cpu") -> BatteryModel:
        """From the ``attributes`` of N schema batteries; refuses what the twin does not simulate."""
        for item in attributes:
            for name in ("power_efficiency_curve", "capacity_power_curve", "efficiency"):
                if item.get(name) is None:
                    raise ValueError(f"battery attribute {name!r} must be explicit: CityLearn draws it at random")
            if item.get("autosize"):
                raise ValueError("autosized batteries are not supported (CityLearn downloads sizing tables)")

        def column(name: str, default: float) -> torch.Tensor:
            values = [float(item.get(name, default)) for item in attributes]
            return torch.tensor(values, dtype=torch.float64, device=device)

        def curve(name: str) -> PiecewiseCurve:
            points = np.array([item[name] for item in attributes], dtype=np.float64)  # [N, K, 2]
            tensor = torch.tensor(points, dtype=torch.float64, device=device)
            return PiecewiseCurve(x=tensor[..., 0].contiguous(), y=tensor[..., 1].contiguous())

        # The efficiency attribute itself only seeds efficiency_history: every charge() overwrites it
        # from the power-efficiency curve before using it, so only the curve matters.
        return cls(
            capacity=column("capacity", 0.0),
            nominal_power=column("nominal_power", 0.0),
            depth_of_discharge=column("depth_of_discharge", 1.0),
            loss_coefficient=column("loss_coefficient", 0.0),
            capacity_loss_coefficient=column("capacity_loss_coefficient", 0.0),
            initial_soc=column("initial_soc", 0.0),
            power_efficiency_curve=curve("power_efficiency_curve"),
            capacity_power_curve=curve("capacity_power_curve"),
        )

    def standby(self, soc_end: torch.Tensor) -> torch.Tensor:
        """``StorageDevice.next_time_step``: the next step starts from soc x (1 - loss), clipped, as float32."""
        maximum = torch.ones_like(soc_end)
        return _f32(torch.minimum(torch.maximum(soc_end * (1.0 - self.loss_coefficient), self.minimum_soc), maximum))

    def charge(
        self, soc_start: torch.Tensor, energy: torch.Tensor, degraded_capacity: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``Battery.charge(energy)`` for one hourly step: (SOC at the end, energy balance, degraded capacity).

        ``soc_start`` is the float32 SOC at the start of the step, ``energy`` the signed kWh asked
        for (+ charge). The balance is what the battery drew (+) or gave (-) on its terminals; the
        capacity after the step's fade is returned for the next one.
        """
        capacity = self.capacity
        degraded = capacity if degraded_capacity is None else degraded_capacity
        minimum_energy = self.minimum_soc * capacity
        energy_init = torch.maximum(minimum_energy, soc_start * capacity)
        soc = energy_init / capacity.clamp_min(ZERO_DIVISION_PLACEHOLDER)
        max_power = (self.nominal_power * self.capacity_power_curve(soc)).clamp_min(0.0)
        max_energy = max_power * 1.0  # power_kw_to_energy_kwh at one-hour steps
        nominal = self.nominal_power.clamp_min(ZERO_DIVISION_PLACEHOLDER)

        charging = energy >= 0
        requested = torch.where(charging, energy, -energy)  # |requested|; the branch decides its limit
        limited = torch.minimum(requested, max_energy)
        curve = self.power_efficiency_curve
        round_trip = self.flat_round_trip
        for _ in range(2):  # CityLearn's two iterations; the last efficiency is the one _charge uses
            if not curve.flat:
                round_trip = curve((limited / 1.0 / nominal).clamp(0.0, 1.0)) ** 0.5
            room = (degraded - energy_init).clamp_min(0.0) / round_trip.clamp_min(ZERO_DIVISION_PLACEHOLDER)
            available = (energy_init - (1.0 - self.depth_of_discharge) * capacity).clamp_min(0.0) * round_trip
            limited = torch.minimum(torch.minimum(requested, max_energy), torch.where(charging, room, available))
        signed = torch.where(charging, limited, -limited)

        # StorageDevice._charge
        energy_final = torch.where(
            signed >= 0,
            torch.minimum(energy_init + signed * round_trip, capacity),
            torch.maximum(minimum_energy, energy_init + signed / round_trip),
        )
        soc_end = _f32(energy_final / capacity.clamp_min(ZERO_DIVISION_PLACEHOLDER))
        delta = energy_final - energy_init
        balance = _f32(torch.where(delta >= 0, delta / round_trip, delta * round_trip))
        if self.has_fade:  # Battery.degrade, with the float32 balance
            scale = 2 * degraded.clamp_min(ZERO_DIVISION_PLACEHOLDER)
            degraded = (degraded - self.capacity_loss_coefficient * capacity * balance.abs() / scale).clamp_min(0.0)
        return soc_end, balance, degraded


@dataclass
class SiteModels:
    """Everything physical the twin needs from the schema: the BESS, the chargers and the EV batteries."""

    bess: BatteryModel  # N = 1
    ev_batteries: BatteryModel  # N = S, socket order
    charger_max_kw: torch.Tensor  # [S] max_charging_power
    charger_min_kw: torch.Tensor  # [S] min_charging_power (a deadband)
    charger_efficiency: torch.Tensor  # [S]

    @classmethod
    def from_schema(cls, schema_path: Path, sockets: int, device: torch.device | str = "cpu") -> SiteModels:
        schema = json.loads(Path(schema_path).read_text())
        if int(schema.get("seconds_per_time_step", 3600)) != 3600:
            raise ValueError("the twin simulates hourly steps only")
        building = schema["buildings"][BUILDING_NAME]
        chargers = [building["chargers"][charger_id(s)] for s in range(sockets)]
        for charger in chargers:
            attributes = charger["attributes"]
            if attributes.get("charge_efficiency_curve") is not None:
                raise ValueError("charger efficiency curves are not simulated by the twin")
            if attributes.get("max_discharging_power", 50.0) > 0:
                raise ValueError("V2G chargers are not simulated by the twin (the env never discharges EVs)")
        ev_batteries = [schema["electric_vehicles_def"][ev_name(s)]["battery"]["attributes"] for s in range(sockets)]
        if any(float(b.get("capacity_loss_coefficient", 0.0)) != 0 for b in ev_batteries):
            raise ValueError("EV battery capacity fade is not simulated by the twin")

        def tensor(values: list[float]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.float64, device=device)

        return cls(
            bess=BatteryModel.from_attributes([building["electrical_storage"]["attributes"]], device),
            ev_batteries=BatteryModel.from_attributes(ev_batteries, device),
            charger_max_kw=tensor([float(c["attributes"].get("max_charging_power", 50.0)) for c in chargers]),
            charger_min_kw=tensor([float(c["attributes"].get("min_charging_power", 0.0)) for c in chargers]),
            charger_efficiency=tensor([float(c["attributes"].get("efficiency", 1.0)) for c in chargers]),
        )

    def charger_energy(self, action: torch.Tensor) -> torch.Tensor:
        """Battery-side kWh each charger sends for actions in [0, 1] (``Charger`` deadband and efficiency).

        CityLearn turns the action into power (``|a| x max``, zero under the minimum power, at most
        the maximum), back into a normalised power (``power / max``), then into energy
        (``normalised x max x 1 h``) and multiplies by the charger efficiency: the round trip
        through the normalised power is kept because it is not exact in floating point.
        """
        max_kw = self.charger_max_kw.clamp_min(0.0)
        min_kw = torch.minimum(self.charger_min_kw, max_kw).clamp_min(0.0)
        power = torch.minimum(action.abs() * max_kw, max_kw)
        power = torch.where((power < min_kw) | (action <= 0) | (max_kw <= 0), torch.zeros_like(power), power)
        normalised = power / max_kw.clamp_min(ZERO_DIVISION_PLACEHOLDER)
        return (normalised * max_kw) * 1.0 * self.charger_efficiency

    def charger_consumption(self, balance: torch.Tensor) -> torch.Tensor:
        """Grid-side kWh of each charger from its EV's battery balance, stored float32 as CityLearn does."""
        efficiency = self.charger_efficiency.clamp_min(ZERO_DIVISION_PLACEHOLDER)
        return _f32(torch.where(balance >= 0, balance / efficiency, balance * efficiency))
