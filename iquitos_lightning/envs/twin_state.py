"""A twin's state: the few tensors its next steps and resets depend on, and their exact save and restore.

Why: the whole state of B simulated sites is a handful of tensors (clocks, episode starts, SOCs, capacities, peaks,
the last observation, with ``record`` the episode's KPI tables so far). Kept in one plain holder, outside the
``nn.Module`` (assigning tensors to a module attribute is slow), it is what a checkpoint saves and a resumed run puts
back (``IquitosTwin.resume_state``, agents/resume.py), so a training run on the twin resumes in the middle of its
episodes; CityLearn resumes exactly only from an episode boundary.
"""

from __future__ import annotations

from typing import Any

import torch

from iquitos_lightning.envs.actions import SocketBands
from iquitos_lightning.envs.twin_physics import BatteryModel
from iquitos_lightning.envs.twin_starts import first_staggered_starts
from iquitos_lightning.metrics.flows import FLOW_COLUMNS


class TwinState:
    """The mutable state of the B envs (tensors), outside the nn.Module so that updating it is cheap."""

    t: torch.Tensor
    start: torch.Tensor
    next_start: torch.Tensor
    soc: torch.Tensor
    capacity: torch.Tensor | None
    peak: torch.Tensor
    observation: torch.Tensor
    bands: SocketBands | None
    flows: torch.Tensor
    departure_soc: torch.Tensor

    def __init__(
        self,
        *,
        envs: int,
        sockets: int,
        hours: int,
        observation_width: int,
        batteries: BatteryModel,
        record: bool,
        device: torch.device,
    ) -> None:
        self.record = record
        self.t = torch.zeros(envs, dtype=torch.long, device=device)
        self.start = torch.zeros(envs, dtype=torch.long, device=device)  # the step the current episode began at
        self.next_start = first_staggered_starts(envs, hours, device)  # the staggered schedule's next start per env
        # Float32 SOC of the BESS (column 0) and the socket EVs at the start of the step (0 if unplugged).
        self.soc = torch.zeros(envs, 1 + sockets, dtype=torch.float32, device=device)
        self.capacity = batteries.capacity.expand(envs, -1).clone() if batteries.has_fade else None
        self.peak = torch.zeros(envs, dtype=torch.float64, device=device)  # month-to-date peak import in the window
        self.observation = torch.zeros(envs, observation_width, dtype=torch.float32, device=device)
        self.bands = None  # compact: the next step's socket bands, from its observation (set by every reset)
        if record:
            self.flows = torch.zeros(envs, hours, len(FLOW_COLUMNS), dtype=torch.float64, device=device)
            self.departure_soc = torch.zeros(envs, hours, sockets, dtype=torch.float32, device=device)

    def tensors(self) -> dict[str, torch.Tensor]:
        """The state's tensors by name (``capacity`` only with battery fade, the KPI tables only with ``record``)."""
        names = ["t", "start", "next_start", "soc", "peak", "observation"]
        names += ["capacity"] if self.capacity is not None else []
        names += ["flows", "departure_soc"] if self.record else []
        return {name: getattr(self, name) for name in names}

    def saved(self) -> dict[str, torch.Tensor]:
        """:meth:`tensors` as CPU copies (what a checkpoint's ``weights_only`` load takes)."""
        return {name: value.detach().to("cpu", copy=True) for name, value in self.tensors().items()}

    def load(self, theirs: dict[str, Any], device: torch.device) -> None:
        """Take :meth:`saved`'s ``theirs`` onto ``device``; a ValueError, naming what differs, when it is of another
        batch, site size or ``record`` setting (nothing is changed then). The carried bands are dropped: the next
        step computes them from the loaded state, bit for bit what was carried (tests/envs/test_twin_start.py)."""
        own = self.tensors()
        if own.keys() != theirs.keys():
            raise ValueError(f"the saved twin state holds {sorted(theirs)}, this twin {sorted(own)}")
        for name, value in own.items():
            if theirs[name].shape != value.shape or theirs[name].dtype != value.dtype:
                raise ValueError(
                    f"the saved twin state's {name} is {theirs[name].dtype} {tuple(theirs[name].shape)}, this twin's "
                    f"{value.dtype} {tuple(value.shape)} (another num_envs or site?)"
                )
        for name in own:
            setattr(self, name, theirs[name].to(device, copy=True))
        self.bands = None

    def keep_bands(self, reset: torch.Tensor, fresh: SocketBands | None) -> None:
        """Carry ``fresh`` bands for the envs that ``reset`` ([B, 1]), the kept ones for the others. None (the next
        step computes them) for a full observation, which carries none, and for a partial reset before any bands
        were kept."""
        kept = self.bands
        if fresh is None or kept is None:
            self.bands = fresh if fresh is not None and bool(reset.all()) else None
            return
        self.bands = SocketBands(
            *(torch.where(reset, new, old) for new, old in zip(_band_fields(fresh), _band_fields(kept), strict=True))
        )


def _band_fields(bands: SocketBands) -> tuple[Any, ...]:
    return (bands.low, bands.high, bands.laxity_h, bands.need_kwh)
