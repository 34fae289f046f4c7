"""IquitosTwin: the site's CityLearn physics as one batched TorchRL env (B sites stepped by tensor ops).

Why: CityLearn is pure Python and costs about 0.35 ms per charger per step, so a year of the
default site (128 sockets) takes minutes. Training can use this twin instead, and so can evaluation:
:func:`~iquitos_lightning.envs.factory.make_env` with ``evaluation=True`` builds CityLearn unless
``env.backend.evaluate`` is ``"twin"`` (then a one-env twin over the full year,
:class:`~iquitos_lightning.envs.twin_gym.TwinGymEnv`, about 10x faster); ``tests/envs/test_twin.py`` proves the two
equal step by step, so either backend gives the same evaluation.

What is the same as :class:`~iquitos_lightning.envs.citylearn.IquitosEnv`, by construction:
- input: the built site's ``schema.json`` (BESS, charger and EV battery parameters and curves,
  read by :mod:`~iquitos_lightning.envs.twin_physics`) and its series/sessions;
- observation: :mod:`~iquitos_lightning.envs.site_tables`' layout (``full`` or ``compact``), built from
  the same :class:`~iquitos_lightning.envs.site_tables.SiteTables` (one float32 table per step with the
  state-dependent columns, :func:`~iquitos_lightning.envs.site_tables.state_columns`, and in ``full`` the
  socket SOCs written in each step);
- action: any layout of :mod:`~iquitos_lightning.envs.actions` (the derived one turned into a ``fleet`` action
  by :mod:`~iquitos_lightning.envs.env_action`), mapped onto the sockets' bands (EV guarantee) by the same
  functions, applied to tensors; a controller above the env reads :meth:`IquitosTwin.hour_context`;
- reward: the objective's functions (:mod:`~iquitos_lightning.envs.reward`,
  :mod:`~iquitos_lightning.envs.objectives`), applied to tensors, with the month-to-date peak import
  kept per env for ``tariff``;
- KPI flows: the same FLOW_COLUMNS/DEPARTURE_COLUMNS tables when ``record=True``.

CityLearn's odd bits it keeps (besides those of the battery model, see ``twin_physics``):
- the building's net consumption is summed in float32 (``mall + BESS``, then ``+ (-PV)``, then
  ``+ EVs``, each a float32 add) while the chargers' total is a float64 sum rounded to float32;
  grid import and export come from that float32 net;
- an EV's SOC is forced to its session's arrival SOC (as float32) on the arrival step, also when
  it follows another session of the same socket back to back;
- the terminal observation shows the sockets of the last step with their SOC after it (the
  Gymnasium env does not re-read them once the episode is over).

No Python loop over envs or sockets: one step is a few dozen tensor ops on [B] and [B, S].
Every env runs its own clock (``t`` per env) so partial resets work. By default (``start="zero"``)
every episode starts at step 0 with the schema's initial BESS SOC and runs the whole year, as
CityLearn's: the simulator is deterministic, seeds change nothing. For training, ``start`` can
spread the envs over the year instead (:data:`START_SCHEDULES`), with ``episode_hours`` long
episodes, so that one rollout of B envs sees B different times of the year, not B copies of January.

Its whole state is a few tensors (clocks, SOCs, peaks, the start schedule and its generator), which
:meth:`IquitosTwin.resume_state` returns and :meth:`IquitosTwin.load_resume_state` puts back: what lets a training
run on the twin resume exactly from a checkpoint taken mid-episode (agents/resume.py); CityLearn resumes exactly
only from an episode boundary.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from tensordict import TensorDictBase
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from iquitos_lightning.envs import objectives
from iquitos_lightning.envs.actions import PER_SOCKET, SocketBands, action_count, socket_bands, socket_power
from iquitos_lightning.envs.env_action import applied_action
from iquitos_lightning.envs.hour_context import HourContext
from iquitos_lightning.envs.import_limit import cap_import
from iquitos_lightning.envs.reference_tables import NO_REFERENCES, ReferenceTables
from iquitos_lightning.envs.reward import RewardScales, RewardWeights, StepOutcome, reward_terms, weighted_reward
from iquitos_lightning.envs.self_consumption import check_idle_band
from iquitos_lightning.envs.site_data import built_site
from iquitos_lightning.envs.site_tables import (
    AUTO,
    COMPACT,
    SOCKET_FEATURES,
    build_site_tables,
    observation_table,
    resolve_observation,
    state_columns,
)
from iquitos_lightning.envs.twin_physics import SiteModels
from iquitos_lightning.fastpath.unchecked_tensordict import unchecked_tensordict
from iquitos_lightning.metrics.flows import DEPARTURE_COLUMNS, FLOW_COLUMNS
from iquitos_lightning.site.config import SiteConfig
from iquitos_lightning.site.forecasts import PAST_DAYS, check_forecasts
from iquitos_lightning.site.series import SiteSeries

F64 = torch.float64


ZERO, STAGGERED, RANDOM = "zero", "staggered", "random"
# Where the episodes of a training twin start: "zero" (hour 0, CityLearn's episode), "staggered" (env b of B first
# starts at hour b x T / B; each next episode starts where the last one ended, wrapping at the year's end) or
# "random" (a uniform hour, from a generator seeded by ``seed``). A mid-session start gives the plugged EV its
# session's arrival SOC; the BESS starts at the schema's initial SOC; the month-to-date peak (tariff) at the
# reference run's value at that hour (``references.start_peaks``, envs/reference_tables.py), or at 0.
START_SCHEDULES = (ZERO, STAGGERED, RANDOM)
# float64 [B, 1 + S] arrays a step keeps alive at once, counted generously (the step makes about 40 such temporaries;
# the allocator reuses most of them): the working set :meth:`IquitosTwin.device_bytes` adds to the tables.
STEP_WORKING_ARRAYS = 64


class IquitosTwin(EnvBase):
    """B copies of the site simulated together (module docstring); one episode = ``config.hours`` steps.

    Args:
        schema_path: the built site's CityLearn ``schema.json`` (the physics parameters).
        series: the built site's series (PV, mall load, prices, sessions).
        reward_weights: reward weights (the CityLearn env's defaults if None).
        num_envs: B, the batch size.
        device: where the tensors live.
        record: keep the hourly flows and departures of every env (for KPIs; costs
            B x hours x (10 + sockets) values, so meant for small B). With ``years``: each env's flows (a reference
            run's grid imports: control/reference_tables.py); the departures table reads one year's sessions.
        compile_physics: ``torch.compile`` the step's physics (:meth:`_simulate`) into fused kernels. It
            takes about a minute on first use (per batch size) and then runs 3-5x faster at small
            B; measured bit-equal to the eager step on the tiny site.
        layout, ev_guarantee, objective, tariff_weights, observation, idle_band: as the CityLearn env's.
        start: where episodes start (:data:`START_SCHEDULES`; "zero" is CityLearn's episode).
        episode_hours: episodes end (truncated) after this many steps, or at the year's end (None: the year).
        seed: the "random" schedule's generator seed.
        forecasts: what the observation's coming hours are (site/forecasts.py): "past_days" (what a site has) or
            "oracle" (the true series).
        years: training years (built sites of the same profile, other seeds; :func:`site_years`): env b of B
            simulates ``years[b % len(years)]``. ``series`` still sets every scale (observation, reward), so each
            year is seen on the scale of the year the agent is evaluated on.
            Empty: every env simulates ``series``.
        references: series of reference runs of each year, made above the env (control/reference_tables.py):
            ``start_peaks``, the billed peak-to-date a ``tariff`` episode starting at that row begins with
            (envs/start_peak.py; None: 0), and ``baseline_rewards`` (training only), subtracted from the reward
            at that row (envs/reward_baseline.py; None: the objective's reward).
    """

    batch_locked = True
    charger_efficiency = 1.0  # the guarantee's grid-to-battery factor, as the CityLearn env's

    def __init__(
        self,
        schema_path: Path,
        series: SiteSeries,
        reward_weights: RewardWeights | None = None,
        *,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        record: bool = False,
        compile_physics: bool = False,
        layout: str = PER_SOCKET,
        ev_guarantee: bool = True,
        objective: str = objectives.THESIS,
        tariff_weights: objectives.TariffWeights | None = None,
        demand_period: str = objectives.MONTH,
        stored_energy_value: float = 0.0,
        shaping_gamma: float = 0.99,
        start: str = ZERO,
        episode_hours: int | None = None,
        seed: int = 0,
        observation: str = AUTO,
        forecasts: str = PAST_DAYS,
        years: Sequence[SiteSeries] = (),
        references: ReferenceTables = NO_REFERENCES,
        idle_band: float = 0.0,
    ) -> None:
        if start not in START_SCHEDULES:
            raise ValueError(f"start must be one of {START_SCHEDULES}, got {start!r}")
        if episode_hours is not None and episode_hours < 1:
            raise ValueError(f"episode_hours must be >= 1, got {episode_hours}")
        super().__init__(device=device, batch_size=torch.Size([num_envs]))
        # The device code path: a step that never waits for the device (no check reads a tensor's value on the host),
        # taken on any device but the CPU (see ``to``); a test sets it on the CPU to run that path there.
        self.sync_free = self.device.type != "cpu"
        self.start = start
        self.episode_hours = episode_hours
        self._start_generator = torch.Generator(device="cpu").manual_seed(seed)
        self.series = series
        self.years = _same_site_years(series, years)
        self.forecasts = check_forecasts(forecasts)
        self.site_config: SiteConfig = series.config
        self.reward_weights = reward_weights or RewardWeights()
        self.reward_scales = RewardScales.for_series(series)
        self.layout = layout
        self.idle_band = check_idle_band(idle_band)  # the self_consumption layouts: BESS actions within it of 0 idle
        self.action_size = action_count(layout, series.config.ev.socket_count)
        self.ev_guarantee = ev_guarantee
        self.objective = objectives.check_objective(objective)
        self.demand_period = objectives.check_demand_period(demand_period)
        self.observation = resolve_observation(observation, layout)  # "full" or "compact"
        # tariff training aid (objectives.stored_energy_shaping): PEN per kWh in the BESS, and the agent's discount
        self.stored_energy_value = stored_energy_value
        self.shaping_gamma = shaping_gamma
        self.tariff = objectives.TariffReward.for_site(
            self.site_config, self.reward_scales, tariff_weights, self.demand_period
        )
        self.num_envs = num_envs
        self.sockets = self.site_config.ev.socket_count
        self.hours = series.hours
        self.record = record
        self.resets_done = 0  # episode counter, read by the agents' checkpoints like EpisodeSeeding's
        self.models = SiteModels.from_schema(schema_path, self.sockets, self.device)
        self.year_tables = [
            build_site_tables(year, self.reward_scales, self.objective, self.demand_period, self.observation, forecasts)
            for year in self.years
        ]
        self.tables = self.year_tables[0]
        # env b reads its year's rows of the tables stacked year after year: row = year offset + clock
        self._row_offset = (torch.arange(num_envs, device=self.device) % len(self.years)) * self.hours
        self._load_tables()
        self._make_specs()
        self._allocate_state()
        # [Y x T] the billed peak-to-date a training episode starts with at each row (None: 0, as CityLearn's episode)
        self._start_peaks = self._reference_table(references.start_peaks, "start_peaks")
        # [Y x T] what the reward subtracts at each row (envs/reward_baseline.py; None: the objective's reward as is)
        if references.baseline_rewards is not None and record:
            raise ValueError("reward_baseline is for training: an evaluation (recording) twin bills the raw reward")
        self._baseline_rewards = self._reference_table(references.baseline_rewards, "baseline_rewards")
        if compile_physics:  # (not "compile": TorchRL's env metaclass takes that keyword for itself)
            self._simulate = torch.compile(self._simulate, dynamic=False)

    # ----- construction ----------------------------------------------------------------------
    def _load_tables(self) -> None:
        """The per-step tensors [Y x T, ...] (the years' tables one after the other) every step indexes with the
        envs' rows (year offset + clock)."""
        device = self.device

        def tensor(parts: list[Any], dtype: torch.dtype = F64) -> torch.Tensor:
            return torch.tensor(np.concatenate([np.asarray(part) for part in parts]), dtype=dtype, device=device)

        years = [_year_arrays(series, tables) for series, tables in zip(self.years, self.year_tables, strict=True)]

        def stacked(name: str, dtype: torch.dtype = F64) -> torch.Tensor:
            return tensor([year[name] for year in years], dtype)

        # Observation of every step with the state columns (and the socket SOCs) still 0.
        self._observation_table = tensor([observation_table(tables) for tables in self.year_tables], torch.float32)
        self._bess_index = self.tables.bess_soc_index
        self._state_end = self.tables.bess_soc_index + self.tables.state_width
        self._connected = stacked("connected", torch.bool)
        self._required_soc = stacked("required_soc")
        self._hours_left = stacked("hours_left")
        self._charger_kw = torch.tensor(self.series.socket_charger_kw, dtype=F64, device=device)
        self._in_peak_window = stacked("in_peak_window")
        self._window_rest_kw = stacked("window_rest_kw")
        self._window_rest_open = stacked("window_rest_open", torch.bool)
        self._demand_period_start = stacked("demand_period_start", torch.bool)
        self._departing = stacked("departing", torch.bool)
        self._arriving = stacked("arriving", torch.bool)
        # CityLearn reads the arrival SOC from the charger CSV as float32 and forces it into a float32 array.
        self._arrival_soc = stacked("arrival_soc", torch.float32)
        self._session_arrival_soc = years[0]["session_arrival_soc"]  # record (one year): the energy delivered
        self._session_arrival_soc_f32 = stacked("session_arrival_soc", torch.float32)  # a mid-session start's EV SOC
        self._battery_kwh = torch.tensor(self.series.socket_battery_kwh, dtype=F64, device=device)
        # [T, 4] float64: PV, mall, price, carbon; [T, 2] float32: mall and the building's PV term (-PV).
        self._hourly = stacked("hourly")
        self._hourly_f32 = stacked("hourly_f32", torch.float32)

    def _make_specs(self) -> None:
        batch = self.batch_size
        size = self._observation_table.shape[1]
        self.observation_spec = Composite(
            observation=Unbounded(shape=(*batch, size), dtype=torch.float32, device=self.device), shape=batch
        )
        self.action_spec = Bounded(-1.0, 1.0, shape=(*batch, self.action_size), dtype=torch.float32, device=self.device)
        self.reward_spec = Unbounded(shape=(*batch, 1), dtype=torch.float32, device=self.device)
        flag = Categorical(2, shape=(*batch, 1), dtype=torch.bool, device=self.device)
        self.full_done_spec = Composite(done=flag.clone(), terminated=flag.clone(), truncated=flag.clone(), shape=batch)

    def _allocate_state(self) -> None:
        # A plain holder: assigning tensors to an EnvBase (an nn.Module) attribute is slow.
        envs, device = self.num_envs, self.device
        batteries = self.models.batteries
        state = _TwinState()
        state.t = torch.zeros(envs, dtype=torch.long, device=device)
        state.start = torch.zeros(envs, dtype=torch.long, device=device)  # the step the current episode began at
        # The staggered schedule's next start per env: env b of B first starts at b x T / B.
        state.next_start = torch.arange(envs, device=device) * self.hours // envs
        # Float32 SOC of the BESS (column 0) and the socket EVs at the start of the step (0 if unplugged).
        state.soc = torch.zeros(envs, 1 + self.sockets, dtype=torch.float32, device=device)
        state.capacity = batteries.capacity.expand(envs, -1).clone() if batteries.has_fade else None
        state.peak = torch.zeros(envs, dtype=F64, device=device)  # month-to-date peak import in the peak window
        state.observation = torch.zeros(envs, self._observation_table.shape[1], dtype=torch.float32, device=device)
        state.bands = None  # compact: the next step's socket bands, from its observation (set by every reset)
        if self.record:
            state.flows = torch.zeros(envs, self.hours, len(FLOW_COLUMNS), dtype=F64, device=device)
            state.departure_soc = torch.zeros(envs, self.hours, self.sockets, dtype=torch.float32, device=device)
        self._state = state

    # ----- TorchRL API -----------------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        state, batteries = self._state, self.models.batteries
        mask = None if tensordict is None else tensordict.get("_reset", None)
        reset = torch.ones(self.num_envs, 1, dtype=torch.bool, device=self.device) if mask is None else mask
        reset = reset.reshape(-1, 1)
        self.resets_done += 1
        first_step = self._first_steps(reset[:, 0])
        first_row = first_step + self._row_offset
        state.t = torch.where(reset[:, 0], first_step, state.t)
        state.start = torch.where(reset[:, 0], first_step, state.start)
        start = batteries.start_soc.expand(self.num_envs, -1).clone()  # StorageDevice.reset
        if self.start == ZERO:  # CityLearn's own reset (bit-equal): the float32 arrival SOC of the CSV at step 0
            start[:, 1:] = torch.where(self._connected[first_row], self._arrival_soc[first_row], 0.0)
        else:
            start[:, 1:] = torch.where(self._connected[first_row], self._session_arrival_soc_f32[first_row], 0.0)
        state.soc = torch.where(reset, start, state.soc)
        if state.capacity is not None:
            state.capacity = torch.where(reset, batteries.capacity, state.capacity)
        peak = torch.zeros_like(state.peak) if self._start_peaks is None else self._start_peaks[first_row]
        state.peak = torch.where(reset[:, 0], peak, state.peak)
        fresh, bands = self._observe(first_row, start[:, 0], start[:, 1:], peak)
        state.observation = torch.where(reset, fresh, state.observation)
        state.bands = _where_bands(reset, bands, state.bands)
        if self.record:
            state.flows[reset[:, 0]] = 0.0
            state.departure_soc[reset[:, 0]] = 0.0
        flag = torch.zeros(self.num_envs, 1, dtype=torch.bool, device=self.device)
        return unchecked_tensordict(
            {
                "observation": state.observation.clone(),
                "done": flag,
                "terminated": flag.clone(),
                "truncated": flag.clone(),
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def _first_steps(self, reset: torch.Tensor) -> torch.Tensor:
        """[B] the step each env's new episode starts at, by the ``start`` schedule (only ``reset`` envs use it)."""
        state = self._state
        if self.start == ZERO:
            return torch.zeros_like(state.t)
        if self.start == RANDOM:
            last = self.hours - (self.episode_hours or 1)
            drawn = torch.randint(0, max(last, 0) + 1, (self.num_envs,), generator=self._start_generator)
            return drawn.to(self.device)
        first = state.next_start.clone()
        length = self.episode_hours or self.hours
        ends = torch.clamp(first + length, max=self.hours)
        state.next_start = torch.where(reset, ends % self.hours, state.next_start)
        return first

    def _reference_table(self, values: np.ndarray | None, name: str) -> torch.Tensor | None:
        """A reference table (envs/reference_tables.py) as a tensor over the stacked years' rows, refused unless it
        has one value per row."""
        if values is None:
            return None
        rows = len(self.years) * self.hours
        if np.shape(values) != (rows,):
            raise ValueError(f"references.{name} must have {rows} values (years x hours), got {np.shape(values)}")
        return torch.tensor(values, dtype=F64, device=self.device)

    def _bands_at(self, row: torch.Tensor, socket_soc: torch.Tensor) -> SocketBands:
        """Each env's socket bands at its row (year offset + clock) for the plugged EVs' SOCs ``socket_soc``."""
        return socket_bands(
            self._connected[row],
            socket_soc,
            self._required_soc[row],
            self._hours_left[row],
            self._battery_kwh,
            self._charger_kw,
            charger_efficiency=self.charger_efficiency,
            guarantee=self.ev_guarantee,
        )

    def hour_context(self) -> HourContext:
        """What a controller above the env may read of the hour each env is at ([B] tensors, envs/hour_context.py):
        the very PV, mall load, socket bands and BESS SOC the next step maps its action with."""
        state = self._state
        row = state.t.clamp_max(self.hours - 1) + self._row_offset
        return HourContext(
            pv_kw=self._hourly[row, 0],
            mall_kw=self._hourly[row, 1],
            bands=self._bands_at(row, state.soc[:, 1:]) if state.bands is None else state.bands,
            bess_soc=state.soc[:, 0].to(F64),
            in_peak_window=self._in_peak_window[row] > 0,
            window_rest_kw=self._window_rest_kw[row],
            window_rest_open=self._window_rest_open[row],
            bess=self.site_config.bess,
        )

    # ----- the twin on another device ------------------------------------------------------------
    def to(self, device: str | torch.device) -> IquitosTwin:
        """The twin with its tables, physics constants and state on ``device`` (specs moved by TorchRL's ``to``).

        Why a twin moves rather than being built there: an agent builds its networks from the training env's specs
        in its constructor, on the CPU, and learns its device only when Lightning places it (agents/base.py moves
        the twin then, ``env.backend.device: training``). Every tensor the twin holds is a plain attribute, which
        ``nn.Module.to`` does not reach, so this moves each one; the carried socket bands are dropped (the next step
        computes them from the moved state, bit for bit what was carried).
        """
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device == self.device:
            return self
        super().to(device)
        self.sync_free = device.type != "cpu"
        for holder in self._tensor_holders():
            for name, value in list(vars(holder).items()):
                if isinstance(value, torch.Tensor):
                    vars(holder)[name] = value.to(device)
        self._state.bands = None
        return self

    def device_bytes(self) -> int:
        """Bytes the twin holds on its device (tables of every year, physics constants, state) plus a step's working
        set (:data:`STEP_WORKING_ARRAYS` float64 arrays of [B, 1 + S] alive at once, with margin): what the memory
        check counts before a run moves the twin to a GPU (profile/memory_budget.py)."""
        held = sum(
            value.numel() * value.element_size()
            for holder in self._tensor_holders()
            for value in vars(holder).values()
            if isinstance(value, torch.Tensor)
        )
        return held + STEP_WORKING_ARRAYS * self.num_envs * (1 + self.sockets) * 8

    def _tensor_holders(self) -> tuple[Any, ...]:
        """Every object whose plain attributes hold the twin's tensors (``nn.Module.to`` reaches none of them)."""
        batteries = self.models.batteries
        curves = (batteries.power_efficiency_curve, batteries.capacity_power_curve)
        return (self, self._state, self.models, batteries, *curves)

    # ----- exact resume -------------------------------------------------------------------------
    def resume_state(self) -> dict[str, Any]:
        """Everything the twin's next steps and resets depend on, as CPU tensors and ints (a checkpoint's
        ``weights_only`` load takes it): each env's clock, episode start, next staggered start, SOCs, capacities,
        peak-to-date and last observation (with ``record``: the episode's flows and departures so far), the
        "random" schedule's generator and the reset counter. :meth:`load_resume_state` puts it back, so a run
        resumed from it goes on in the middle of the same episodes (CityLearn cannot: it resumes at a boundary).
        """
        tensors = {name: value.detach().to("cpu", copy=True) for name, value in self._state_tensors().items()}
        return {
            "tensors": tensors,
            "start_generator": self._start_generator.get_state(),
            "resets_done": int(self.resets_done),
        }

    def load_resume_state(self, saved: dict[str, Any]) -> None:
        """Continue from :meth:`resume_state`'s ``saved``; a ValueError, naming what differs, when it is of another
        batch, site size or ``record`` setting (nothing is changed then)."""
        own = self._state_tensors()
        theirs = saved["tensors"]
        if own.keys() != theirs.keys():
            raise ValueError(f"the saved twin state holds {sorted(theirs)}, this twin {sorted(own)}")
        for name, value in own.items():
            if theirs[name].shape != value.shape or theirs[name].dtype != value.dtype:
                raise ValueError(
                    f"the saved twin state's {name} is {theirs[name].dtype} {tuple(theirs[name].shape)}, this twin's "
                    f"{value.dtype} {tuple(value.shape)} (another num_envs or site?)"
                )
        for name in own:
            setattr(self._state, name, theirs[name].to(self.device, copy=True))
        # the carried bands (compact) are this twin's own reset's: the next step computes them from the loaded
        # state instead, bit for bit what was carried (tests/envs/test_twin_start.py)
        self._state.bands = None
        self._start_generator.set_state(saved["start_generator"])
        self.resets_done = int(saved["resets_done"])

    def _state_tensors(self) -> dict[str, torch.Tensor]:
        """The state's tensors by name (``capacity`` only with battery fade, the KPI tables only with ``record``)."""
        state = self._state
        names = ["t", "start", "next_start", "soc", "peak", "observation"]
        names += ["capacity"] if state.capacity is not None else []
        names += ["flows", "departure_soc"] if self.record else []
        return {name: getattr(state, name) for name in names}

    @property
    def peak_to_date_kw(self) -> torch.Tensor:
        """[B] each env's billed peak-to-date (the ``tariff`` demand charge's base) at the start of its next step."""
        return self._state.peak.clone()

    # Outputs are built without per-entry validation (fastpath/unchecked_tensordict.py): every entry is a
    # fresh tensor of the env's batch size and device, and the validation is half of a B=1 step.
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        state = self._state
        if not self.sync_free and bool((state.t >= self.hours).any()):
            raise RuntimeError("an episode is over: reset it first")
        result = self._simulate(state.t, state.soc, state.capacity, state.peak, tensordict.get("action"), state.bands)
        state.t, state.soc, state.capacity, state.peak, state.observation, reward, terminated, flows, departing_soc = (
            result[:9]
        )
        state.bands = result[9]
        if self.record:
            rows = torch.arange(self.num_envs, device=self.device)
            state.flows[rows, state.t - 1] = flows
            state.departure_soc[rows, state.t - 1] = departing_soc
        truncated = torch.zeros_like(terminated)
        if self.episode_hours is not None:
            truncated = (state.t - state.start >= self.episode_hours).reshape(terminated.shape) & ~terminated
        return unchecked_tensordict(
            {
                "observation": state.observation.clone(),
                "reward": reward,
                "done": terminated | truncated,
                "terminated": terminated.clone(),
                "truncated": truncated,
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def _simulate(
        self,
        t: torch.Tensor,
        soc: torch.Tensor,
        capacity: torch.Tensor | None,
        peak: torch.Tensor,
        action: torch.Tensor,
        bands: SocketBands | None = None,
    ) -> tuple[Any, ...]:
        """One hour of every env, a pure function of the state (so ``compile_physics`` can fuse it).

        ``bands``: this hour's socket bands when the state carries them (the compact observation computed them
        for itself, from the same clocks and SOCs); None: computed here.

        Returns the next clocks, SOCs, capacities, month-to-date peaks and observations, the float32
        reward [B, 1], ``terminated`` [B, 1], with ``record`` this hour's FLOW_COLUMNS rows and
        departing SOCs (else None, None), and the next hour's bands (compact; else None).
        """
        models = self.models
        action = action.to(F64).clamp(-1.0, 1.0)
        row = t + self._row_offset  # each env's row of the stacked years' tables
        connected = self._connected[row]
        required = self._required_soc[row]

        # The env's action -> each socket's kW inside its band -> the fraction of charger power CityLearn takes.
        if bands is None:
            bands = self._bands_at(row, soc[:, 1:])
        hourly, hourly_f32 = self._hourly[row], self._hourly_f32[row]
        in_window = self._in_peak_window[row]
        action = applied_action(
            self.layout,
            action,
            pv_kw=hourly[:, 0],
            mall_kw=hourly[:, 1],
            bands=bands,
            in_peak_window=in_window > 0,
            bess=self.site_config.bess,
            idle_band=self.idle_band,
        )
        bess_action, socket_kw = cap_import(
            action[:, 0],
            socket_power(self.layout, action, bands),
            pv_kw=hourly[:, 0],
            mall_kw=hourly[:, 1],
            guaranteed_kw=bands.low,
            bess_power_kw=self.site_config.bess.power_kw,
            limit_kw=self.site_config.grid.import_limit_kw,
        )
        physical = torch.cat([bess_action[:, None], socket_kw / self._charger_kw], -1)

        # Every battery at once: BESS (column 0) and the EV of each socket (columns 1..S).
        soc_end, balance, capacity = models.batteries.charge(soc, models.battery_energy(physical, connected), capacity)
        bess_kw = balance[:, 0]
        socket_kw = torch.where(connected, models.charger_consumption(balance[:, 1:]), 0.0)
        soc_before = soc[:, 1:]
        soc_after = torch.where(connected, soc_end[:, 1:], soc_before)

        # Building.update_variables: float32 net (see the module docstring).
        ev_total_f32 = socket_kw.sum(-1, dtype=F64).to(torch.float32)
        net = (((hourly_f32[:, 0] + bess_kw) + hourly_f32[:, 1]) + ev_total_f32).to(F64)
        grid_import = net.clamp_min(0.0)

        useful_kwh = torch.minimum(socket_kw, (required - soc_before).clamp_min(0.0) * self._battery_kwh).sum(-1)
        departing = self._departing[row]
        gap_kwh = (required - soc_after).clamp_min(0.0) * self._battery_kwh
        bess_kw = bess_kw.to(F64)
        bess_charge = bess_kw.clamp_min(0.0)
        outcome = StepOutcome(
            grid_import_kw=grid_import,
            pv_kw=hourly[:, 0],
            mall_kw=hourly[:, 1],
            bess_charge_kw=bess_charge,
            ev_useful_kwh=useful_kwh,
            departing_unmet_kwh=torch.where(departing, gap_kwh, 0.0).sum(-1),
            price_per_kwh=hourly[:, 2],
            carbon_intensity_kg_per_kwh=hourly[:, 3],
        )
        if self.objective == objectives.TARIFF:
            reward = self.tariff(grid_import, hourly[:, 2], hourly[:, 3], peak, in_window)
        else:
            reward = weighted_reward(reward_terms(outcome, self.reward_scales), self.reward_weights)
        if self.stored_energy_value:
            reward = reward + self._shaping(soc[:, 0].to(F64), soc_end[:, 0].to(F64))
        if self._baseline_rewards is not None:
            reward = reward - self._baseline_rewards[row]
        peak = objectives.next_peak_to_date(grid_import, peak, in_window)
        flows = departing_soc = None
        if self.record:  # the Gymnasium env's bookkeeping (FLOW_COLUMNS order)
            flow = (hourly[:, 0], hourly[:, 1], socket_kw.sum(-1, dtype=F64), bess_charge, (-bess_kw).clamp_min(0.0))
            flow += (grid_import, (-net).clamp_min(0.0), soc_end[:, 0].to(F64), hourly[:, 2], hourly[:, 3])
            flows = torch.stack(flow, -1)
            departing_soc = torch.where(departing, soc_after, 0.0)

        # Advance the clocks: standby loss, then the EVs plugged at the next step (arrivals forced).
        t_next = t + 1
        terminated = (t_next >= self.hours)[:, None]
        step = t_next.clamp_max(self.hours - 1) + self._row_offset  # the next step's row
        soc_next = models.batteries.standby(soc_end)
        starting = torch.where(self._arriving[step], self._arrival_soc[step], soc_next[:, 1:])
        soc_next[:, 1:] = torch.where(self._connected[step], starting, 0.0)
        peak = torch.where(self._demand_period_start[step] & ~terminated[:, 0], 0.0, peak)
        socket_soc = torch.where(terminated, soc_after, soc_next[:, 1:])
        observation, next_bands = self._observe(step, soc_end[:, 0], socket_soc, peak)
        reward = reward.to(torch.float32)[:, None]
        return t_next, soc_next, capacity, peak, observation, reward, terminated, flows, departing_soc, next_bands

    def _shaping(self, soc_before: Any, soc_after: Any) -> Any:
        bess = self.site_config.bess
        return objectives.stored_energy_shaping(
            soc_before,
            soc_after,
            self.stored_energy_value,
            bess.capacity_kwh,
            self.shaping_gamma,
            objectives.shaping_scale(self.objective, self.tariff.scale, self.reward_scales.max_import_kw),
        )

    def _set_seed(self, seed: int | None) -> None:
        """Nothing to seed: the twin is deterministic (as the CityLearn env's observations and rewards are)."""

    # ----- KPI tables (record=True) --------------------------------------------------------------
    def flows(self, env_index: int = 0) -> pd.DataFrame:
        """Hourly energy flows (FLOW_COLUMNS) of env ``env_index``'s steps so far in this episode."""
        self._require_record()
        steps = int(self._state.t[env_index])
        return pd.DataFrame(self._state.flows[env_index, :steps].cpu().numpy(), columns=list(FLOW_COLUMNS))

    def departures(self, env_index: int = 0) -> pd.DataFrame:
        """One row per EV that left env ``env_index`` so far (DEPARTURE_COLUMNS), by step then socket."""
        self._require_record()
        if len(self.years) > 1:
            raise RuntimeError("departures are read for a twin of one year: build it without years")
        steps = int(self._state.t[env_index])
        step, socket = np.nonzero(self._departing[:steps].cpu().numpy())
        soc = self._state.departure_soc[env_index, :steps].cpu().numpy().astype(np.float64)[step, socket]
        required = self.tables.required_soc[step, socket]
        battery = self.series.socket_battery_kwh[socket]
        table = pd.DataFrame(
            {
                "socket": socket,
                "departure_step": step + 1,
                "required_soc": required,
                "departure_soc": soc,
                "energy_delivered_kwh": (soc - self._session_arrival_soc[step, socket]) * battery,
                "unmet_kwh": np.clip(required - soc, 0.0, None) * battery,
            },
            columns=list(DEPARTURE_COLUMNS),
        )
        return table.astype({"socket": int, "departure_step": int})

    # ----- internals -----------------------------------------------------------------------------
    def _observe(
        self, step: torch.Tensor, bess_soc: torch.Tensor, socket_soc: torch.Tensor, peak: torch.Tensor
    ) -> tuple[torch.Tensor, SocketBands | None]:
        """The float32 observations: the step's table row (``step``: each env's row, year offset + clock) with the
        state columns (BESS SOC, the peak, the fleet sums of ``compact``; the socket SOCs of ``full``) written in,
        by the CityLearn env's functions; and, ``compact``, the bands it read, which are the next ``_simulate``'s
        (same rows, same SOCs: the state carries them so the step does not compute them twice; a terminated env's
        bands, read from the SOCs after its last hour, are replaced by its reset before any step reads them)."""
        observation = self._observation_table[step]
        bands = connected = hours_left = None
        if self.observation == COMPACT:  # the band the next action maps onto, as _simulate computes it
            connected, hours_left = self._connected[step], self._hours_left[step]
            bands = socket_bands(
                connected,
                socket_soc,
                self._required_soc[step],
                hours_left,
                self._battery_kwh,
                self._charger_kw,
                charger_efficiency=self.charger_efficiency,
                guarantee=self.ev_guarantee,
            )
        state = state_columns(self.tables, bess_soc, peak, bands, connected, hours_left)
        observation[:, self._bess_index : self._state_end] = state.to(torch.float32)
        if self.observation != COMPACT:
            sockets = observation[:, self._state_end :].view(self.num_envs, self.sockets, len(SOCKET_FEATURES))
            sockets[:, :, SOCKET_FEATURES.index("soc")] = socket_soc
        return observation, bands

    def _require_record(self) -> None:
        if not self.record:
            raise RuntimeError("build the twin with record=True to read its flows and departures")


def _where_bands(reset: torch.Tensor, fresh: SocketBands | None, kept: SocketBands | None) -> SocketBands | None:
    """The bands of the envs that ``reset`` ([B, 1]) from ``fresh``, the others' ``kept``. None (the next step computes
    them) for a full observation, which carries none, and for a partial reset before any bands were kept."""
    if fresh is None or kept is None:
        return fresh if fresh is not None and bool(reset.all()) else None
    return SocketBands(
        *(torch.where(reset, new, old) for new, old in zip(_band_fields(fresh), _band_fields(kept), strict=True))
    )


def _band_fields(bands: SocketBands) -> tuple[Any, ...]:
    return (bands.low, bands.high, bands.laxity_h, bands.need_kwh)


# Bytes of one row (one hour of one year) of the twin's tables beyond the observation's float32 columns: per socket
# the plugged flag, required SOC, hours left, departing and arriving flags, arrival SOCs (1 + 8 + 8 + 1 + 1 + 4 + 4),
# and per hour the series, window and period columns, start peaks, baseline and the critic's hindsight (counted high).
TABLE_BYTES_PER_SOCKET_ROW = 27
TABLE_BYTES_PER_HOUR_ROW = 512


def twin_device_bytes(*, rows: int, sockets: int, observation_width: int) -> tuple[int, int]:
    """What :meth:`IquitosTwin.device_bytes` will be, from sizes alone (no site built; the auto profile's input):
    (the tables' bytes for ``rows`` = years x hours, the bytes per env of state and a step's working set).
    ``tests/envs/test_device_twin.py`` holds it at or above the measured bytes."""
    tables = rows * (observation_width * 4 + sockets * TABLE_BYTES_PER_SOCKET_ROW + TABLE_BYTES_PER_HOUR_ROW)
    per_env = observation_width * 4 + (1 + sockets) * (4 + STEP_WORKING_ARRAYS * 8) + 64
    return tables, per_env


def _same_site_years(series: SiteSeries, years: Sequence[SiteSeries]) -> list[SiteSeries]:
    """``years`` (or ``[series]``), refused unless each is a year of ``series``' site: the same hours, sockets and
    physics; the stacked tables and the one set of models need that."""
    years = list(years) or [series]
    for year in years:
        config = year.config
        same = (
            year.hours == series.hours
            and np.array_equal(year.socket_charger_kw, series.socket_charger_kw)
            and np.array_equal(year.socket_battery_kwh, series.socket_battery_kwh)
            and config.bess == series.config.bess
            and config.grid == series.config.grid
            and config.calendar == series.config.calendar
        )
        if not same:
            raise ValueError(
                f"training year {config.name!r} is not a year of site {series.config.name!r}: a twin batches years "
                "of one site profile (same calendar, sockets, BESS and grid; other seeds)"
            )
    return years


def _year_arrays(series: SiteSeries, tables: Any) -> dict[str, np.ndarray]:
    """The per-step arrays [T, ...] of one year the twin's step reads (numpy; stacked by ``_load_tables``)."""
    hours, sockets = series.hours, series.config.ev.socket_count
    sessions = series.sessions
    steps, socket = sessions["arrival_step"].to_numpy(int), sessions["socket"].to_numpy(int)
    inside = steps < hours
    arrival_soc = np.zeros((hours, sockets))
    arrival_soc[steps[inside], socket[inside]] = sessions["arrival_soc"].to_numpy(float)[inside]
    arriving = np.zeros((hours, sockets), dtype=bool)
    arriving[steps[inside], socket[inside]] = True
    # The session's own arrival SOC (float64), from which the env measures the energy delivered.
    session_arrival = np.zeros((hours, sockets))
    plugged = tables.session_of >= 0
    session_arrival[plugged] = sessions["arrival_soc"].to_numpy(float)[tables.session_of[plugged]]
    return {
        "connected": tables.connected,
        "required_soc": tables.required_soc,
        "hours_left": tables.hours_to_departure,
        "in_peak_window": tables.in_peak_window,
        "window_rest_kw": tables.window_rest_kw,
        "window_rest_open": tables.window_rest_open,
        "demand_period_start": tables.demand_period_start,
        # Sessions leaving at the start of t + 1 are those plugged at t with one hour to go.
        "departing": tables.connected & (tables.hours_to_departure == 1),
        "arriving": arriving,
        "arrival_soc": arrival_soc,
        "session_arrival_soc": session_arrival,
        "hourly": np.column_stack(
            [series.pv_kw, series.mall_kw, series.price_per_kwh, series.carbon_intensity_kg_per_kwh]
        ),
        "hourly_f32": np.column_stack([series.mall_kw, -series.pv_kw]),
    }


class _TwinState:
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


def make_twin(
    site: str | Path | SiteConfig = "configs/site/iquitos-2026.yaml",
    *,
    data_root: Path = Path("data"),
    twin_class: type[IquitosTwin] = IquitosTwin,
    **options: Any,
) -> IquitosTwin:
    """Build (or reuse) the site's dataset under ``data_root/<name>`` and simulate it as a ``twin_class`` (an
    :class:`IquitosTwin`, or the training twin of envs/training_twin.py); ``options`` are its keyword arguments
    (reward weights, batch size, device, layout, objective, starts...)."""
    build = built_site(site, data_root)
    return twin_class(build.schema_path, build.series, **options)
