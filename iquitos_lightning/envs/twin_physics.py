"""CityLearn 3.0.2's battery and charger models, vectorised over tensors, read from the site's schema.

Why a transcription and not a model of our own: the twin must reproduce CityLearn step for step,
so every formula below follows ``citylearn/energy_model.py`` (``Battery.charge``,
``StorageDevice._charge``, ``get_max_input_power``, ``get_current_efficiency``,
``StorageDevice.next_time_step``) and ``citylearn/electric_vehicle_charger.py``
(``Charger.update_connected_electric_vehicle_soc``) operation by operation, in float64, with a
rounding to float32 wherever CityLearn stores a value in one of its float32 arrays (the twin
keeps those values as float32 tensors; float32 x float64 promotes exactly, as numpy does). CityLearn's
odd bits are kept on purpose and named where they happen:

- SOC, energy balance and electricity consumption live in float32 arrays;
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

from iquitos_lightning.site.build import BUILDING_NAME
from iquitos_lightning.site.charger_files import charger_id, ev_name

ZERO_DIVISION_PLACEHOLDER = 1e-6  # citylearn.data.ZERO_DIVISION_PLACEHOLDER
SECONDS_PER_HOUR = 3600.0


def _python_sqrt(values: torch.Tensor) -> torch.Tensor:
    """``x ** 0.5`` as Python computes it (C ``pow``): torch's ``pow(x, 0.5)`` is ``sqrt``, which
    differs from it in the last bit for about 2 % of inputs. Used where the input is a constant."""
    return torch.tensor([value**0.5 for value in values.tolist()], dtype=torch.float64, device=values.device)


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
        # Constants of every step, computed once (same expressions as CityLearn's, so same bits).
        capacity = self.capacity
        self.capacity_clamped = capacity.clamp_min(ZERO_DIVISION_PLACEHOLDER)
        self.minimum_soc = (1.0 - self.depth_of_discharge).clamp(0.0, 1.0)  # Battery._minimum_soc
        self.minimum_energy = self.minimum_soc * capacity  # StorageDevice._minimum_energy
        self.discharge_floor = (1.0 - self.depth_of_discharge) * capacity  # Battery.charge's dod limit
        self.nominal_clamped = self.nominal_power.clamp_min(ZERO_DIVISION_PLACEHOLDER)
        # A flat capacity-power curve: the limit is nominal x y0 at any SOC (x 1 h).
        self.flat_max_energy = (self.nominal_power * self.capacity_power_curve.y[..., 0]).clamp_min(0.0) * 1.0
        # One-way efficiency of a flat power-efficiency curve, rounded as CityLearn's Python pow does.
        self.flat_round_trip = _python_sqrt(self.power_efficiency_curve.y[..., 0])
        self.has_fade = bool((self.capacity_loss_coefficient != 0).any())

    @property
    def start_soc(self) -> torch.Tensor:
        """SOC at time step 0 after ``reset``: max(initial_soc, minimum SOC), as float32."""
        return torch.maximum(self.initial_soc, self.minimum_soc).to(torch.float32)

    @classmethod
    def from_attributes(cls, attributes: list[dict[str, Any]], device: torch.device | str = "cpu") -> BatteryModel:
        """From the ``attributes`` of N schema batteries; refuses what the twin does not simulate.

        Curves with fewer points than the longest are padded past their end (x + 1, x + 2, ...)
        with their last y: identical inside the curve's range, flat beyond it (CityLearn would
        extrapolate its last segment there; the site's curves span [0, 1], so this never happens).
        """
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
            curves = [np.asarray(item[name], dtype=np.float64) for item in attributes]
            points = max(len(points) for points in curves)
            padded = []
            for values in curves:
                extra = np.arange(1, points - len(values) + 1)
                tail = np.column_stack([values[-1, 0] + extra, np.full(len(extra), values[-1, 1])])
                padded.append(np.concatenate([values, tail]))
            tensor = torch.tensor(np.stack(padded), dtype=torch.float64, device=device)  # [N, K, 2]
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
        """``StorageDevice.next_time_step``: the next step starts from soc x (1 - loss) clipped to [min, 1], float32."""
        kept = torch.maximum(soc_end * (1.0 - self.loss_coefficient), self.minimum_soc)
        return kept.clamp_max(1.0).to(torch.float32)

    def charge(
        self, soc_start: torch.Tensor, energy: torch.Tensor, degraded_capacity: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``Battery.charge(energy)`` for one hourly step: (SOC at the end, energy balance, degraded capacity).

        ``soc_start`` [..., N] is the float32 SOC at the start of the step, ``energy`` [..., N] the
        signed float64 kWh asked for (+ charge). Returns the float32 SOC at the end, the float32
        balance (what the battery drew + or gave - on its terminals) and the capacity after the
        step's fade (``degraded_capacity`` unchanged without fade).
        """
        capacity = self.capacity
        degraded = capacity if degraded_capacity is None else degraded_capacity
        energy_init = torch.maximum(self.minimum_energy, soc_start * capacity)  # float32 SOC x capacity, in float64
        if self.capacity_power_curve.flat:
            max_energy = self.flat_max_energy
        else:  # Battery.get_max_input_power at the SOC the step starts from
            curve_y = self.capacity_power_curve(energy_init / self.capacity_clamped)
            max_energy = (self.nominal_power * curve_y).clamp_min(0.0) * 1.0

        charging = energy >= 0
        requested = energy.abs()  # the branch (charging or not) decides which limit applies
        curve = self.power_efficiency_curve
        round_trip = self.flat_round_trip
        limited = torch.minimum(requested, max_energy)
        # CityLearn iterates twice (efficiency at the limited power, then the limit again); with a
        # flat curve the efficiency is constant and one pass gives the same numbers.
        for _ in range(1 if curve.flat else 2):
            if not curve.flat:
                round_trip = curve((limited / 1.0 / self.nominal_clamped).clamp(0.0, 1.0)) ** 0.5
            room = (degraded - energy_init).clamp_min(0.0) / round_trip.clamp_min(ZERO_DIVISION_PLACEHOLDER)
            available = (energy_init - self.discharge_floor).clamp_min(0.0) * round_trip
            limited = torch.minimum(torch.minimum(requested, max_energy), torch.where(charging, room, available))

        # StorageDevice._charge with energy = +limited or -limited (-0.0 takes the charging formula,
        # which gives energy_init as the discharging one would).
        energy_final = torch.where(
            charging,
            torch.minimum(energy_init + limited * round_trip, capacity),
            torch.maximum(self.minimum_energy, energy_init - limited / round_trip),
        )
        soc_end = (energy_final / self.capacity_clamped).to(torch.float32)
        delta = energy_final - energy_init
        balance = torch.where(delta >= 0, delta / round_trip, delta * round_trip).to(torch.float32)
        if self.has_fade:  # Battery.degrade, with the float32 balance
            scale = 2 * degraded.clamp_min(ZERO_DIVISION_PLACEHOLDER)
            degraded = (degraded - self.capacity_loss_coefficient * capacity * balance.abs() / scale).clamp_min(0.0)
        return soc_end, balance, (degraded if degraded_capacity is not None else None)


@dataclass
class SiteModels:
    """Everything physical the twin needs from the schema, as one battery bank and S chargers.

    ``batteries`` holds N = 1 + S CityLearn batteries: index 0 is the BESS, 1 + s the EV of
    socket s (one EV per socket, reused by its sessions), so one step charges all of them with
    one set of tensor ops.
    """

    batteries: BatteryModel
    charger_max_kw: torch.Tensor  # [S] max_charging_power
    charger_min_kw: torch.Tensor  # [S] min_charging_power (a deadband)
    charger_efficiency: torch.Tensor  # [S]

    def __post_init__(self) -> None:
        self.bess_power_kw = self.batteries.nominal_power[:1]
        self.charger_max_clamped = self.charger_max_kw.clamp_min(0.0)
        self.charger_max_divisor = self.charger_max_kw.clamp_min(ZERO_DIVISION_PLACEHOLDER)
        self.charger_min_clamped = torch.minimum(self.charger_min_kw, self.charger_max_clamped).clamp_min(0.0)
        self.has_deadband = bool((self.charger_min_clamped > 0).any() or (self.charger_max_clamped <= 0).any())
        self.lossless_chargers = bool((self.charger_efficiency == 1.0).all())

    @classmethod
    def from_schema(cls, schema_path: Path, sockets: int, device: torch.device | str = "cpu") -> SiteModels:
        schema = json.loads(Path(schema_path).read_text())
        if int(schema.get("seconds_per_time_step", 3600)) != 3600:
            raise ValueError("the twin simulates hourly steps only")
        building = schema["buildings"][BUILDING_NAME]
        chargers = [building["chargers"][charger_id(s)]["attributes"] for s in range(sockets)]
        for attributes in chargers:
            if attributes.get("charge_efficiency_curve") is not None:
                raise ValueError("charger efficiency curves are not simulated by the twin")
        ev_batteries = [schema["electric_vehicles_def"][ev_name(s)]["battery"]["attributes"] for s in range(sockets)]
        if any(float(b.get("capacity_loss_coefficient", 0.0)) != 0 for b in ev_batteries):
            raise ValueError("EV battery capacity fade is not simulated by the twin")

        def attribute(name: str, default: float) -> torch.Tensor:
            # Charger defaults of citylearn/electric_vehicle_charger.py (None means the default).
            values = [default if c.get(name) is None else float(c[name]) for c in chargers]
            return torch.tensor(values, dtype=torch.float64, device=device)

        bess = building["electrical_storage"]["attributes"]
        return cls(
            batteries=BatteryModel.from_attributes([bess, *ev_batteries], device),
            charger_max_kw=attribute("max_charging_power", 50.0),
            charger_min_kw=attribute("min_charging_power", 0.0),
            charger_efficiency=attribute("efficiency", 1.0),
        )

    def battery_energy(self, action: torch.Tensor, connected: torch.Tensor) -> torch.Tensor:
        """Signed kWh asked of each battery [B, 1 + S] for an env action [B, 1 + S] already clipped to [-1, 1].

        BESS (``Building.update_electrical_storage``): action x nominal power x 1 h. Sockets: the
        env sends max(action, 0) to plugged sockets and 0 elsewhere; CityLearn's ``Charger`` turns
        that into power (``a x max``, zero under the minimum power, at most the maximum), back into
        a normalised power (``power / max``), into energy (``normalised x max x 1 h``) and applies
        its efficiency. The round trip through the normalised power is kept: it is not exact.
        """
        bess = action[:, :1] * self.bess_power_kw
        socket_action = torch.where(connected, action[:, 1:].clamp_min(0.0), 0.0)
        power = torch.minimum(socket_action * self.charger_max_clamped, self.charger_max_clamped)
        if self.has_deadband:
            power = torch.where(power < self.charger_min_clamped, 0.0, power)
            power = torch.where(self.charger_max_clamped <= 0, 0.0, power)
        energy = power / self.charger_max_divisor * self.charger_max_kw
        if not self.lossless_chargers:  # x 1.0 is exact: skipped when every charger is lossless
            energy = energy * self.charger_efficiency
        return torch.cat([bess, energy], -1)

    def charger_consumption(self, balance: torch.Tensor) -> torch.Tensor:
        """Grid-side kWh of each charger from its EV's float32 battery balance, stored float32 as CityLearn does."""
        if self.lossless_chargers:  # balance / 1.0 and balance x 1.0 are the balance itself
            return balance
        efficiency = self.charger_efficiency.clamp_min(ZERO_DIVISION_PLACEHOLDER)
        return torch.where(balance >= 0, balance / efficiency, balance * efficiency).to(torch.float32)
