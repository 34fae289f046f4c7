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

This module is the TorchRL env: its options, specs, resets and steps. What it stands on, one concern a module:
the tables it reads (envs/twin_tables.py), the step's physics (envs/twin_step.py, with CityLearn's odd bits it
keeps), its state and exact resume (envs/twin_state.py), where episodes start (envs/twin_starts.py), its moves to
another device (envs/twin_device.py) and the KPI tables of a recording twin (envs/twin_record.py).

Every env runs its own clock (``t`` per env) so partial resets work. By default (``start="zero"``)
every episode starts at step 0 with the schema's initial BESS SOC and runs the whole year, as
CityLearn's: the simulator is deterministic, seeds change nothing. For training, ``start`` can
spread the envs over the year instead (:data:`~iquitos_lightning.envs.twin_starts.START_SCHEDULES`), with
``episode_hours`` long episodes, so that one rollout of B envs sees B different times of the year, not B copies of
January.

Its whole state is a few tensors (clocks, SOCs, peaks, the start schedule and its generator), which
:meth:`IquitosTwin.resume_state` returns and :meth:`IquitosTwin.load_resume_state` puts back: what lets a training
run on the twin resume exactly from a checkpoint taken mid-episode (agents/resume.py); CityLearn resumes exactly
only from an episode boundary.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from tensordict import TensorDictBase
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from iquitos_lightning.envs import objectives
from iquitos_lightning.envs.actions import PER_SOCKET, action_count
from iquitos_lightning.envs.hour_context import HourContext
from iquitos_lightning.envs.reference_tables import NO_REFERENCES, ReferenceTables
from iquitos_lightning.envs.reward import RewardScales, RewardWeights
from iquitos_lightning.envs.self_consumption import check_idle_band
from iquitos_lightning.envs.site_data import built_site
from iquitos_lightning.envs.site_tables import AUTO, build_site_tables, resolve_observation
from iquitos_lightning.envs.twin_device import held_bytes, move_tensors, resolved_device, step_working_bytes
from iquitos_lightning.envs.twin_physics import SiteModels
from iquitos_lightning.envs.twin_record import departures_frame, flows_frame
from iquitos_lightning.envs.twin_starts import START_SCHEDULES, ZERO, first_steps
from iquitos_lightning.envs.twin_state import TwinState
from iquitos_lightning.envs.twin_step import TwinStep, compiled_physics
from iquitos_lightning.envs.twin_tables import reference_rows, same_site_years, stacked_tables
from iquitos_lightning.fastpath.unchecked_tensordict import unchecked_tensordict
from iquitos_lightning.site.config import SiteConfig
from iquitos_lightning.site.forecasts import PAST_DAYS, check_forecasts
from iquitos_lightning.site.series import SiteSeries


class IquitosTwin(TwinStep, EnvBase):
    """B copies of the site simulated together (module docstring); one episode = ``config.hours`` steps.

    Args:
        schema_path: the built site's CityLearn ``schema.json`` (the physics parameters).
        series: the built site's series (PV, mall load, prices, sessions).
        reward_weights: reward weights (the CityLearn env's defaults if None).
        num_envs: B, the batch size.
        device: where the tensors live.
        record: keep the hourly flows and departures of every env (for KPIs; costs
            B x hours x (10 + sockets) values, so meant for small B). With ``years``: each env's flows (a reference
            run's grid imports: control/training_references.py); the departures table reads one year's sessions.
        compile_physics: ``torch.compile`` the step's physics (:meth:`_simulate`) into fused kernels. It
            compiles on first use (per batch size) and then runs faster at small B (docs/twin.md "The compiled
            twin"); bit-equal to the eager step on every layout and objective and on the device code path
            (tests/envs/test_twin_compiled*.py, on the tiny site).
        layout, ev_guarantee, objective, tariff_weights, observation, idle_band: as the CityLearn env's.
        start: where episodes start (envs/twin_starts.py: "zero" is CityLearn's episode).
        episode_hours: episodes end (truncated) after this many steps, or at the year's end (None: the year).
        seed: the "random" schedule's generator seed.
        forecasts: what the observation's coming hours are (site/forecasts.py): "past_days" (what a site has) or
            "oracle" (the true series).
        years: training years (built sites of the same profile, other seeds; :func:`site_years`): env b of B
            simulates ``years[b % len(years)]``. ``series`` still sets every scale (observation, reward), so each
            year is seen on the scale of the year the agent is evaluated on.
            Empty: every env simulates ``series``.
        references: series of reference runs of each year, made above the env (control/training_references.py):
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
        self.years = same_site_years(series, years)
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
        rows = len(self.years) * self.hours  # the stacked years' rows
        # [Y x T] the billed peak-to-date a training episode starts with at each row (None: 0, as CityLearn's episode)
        self._start_peaks = reference_rows(references.start_peaks, rows, "start_peaks", self.device)
        # [Y x T] what the reward subtracts at each row (envs/reward_baseline.py; None: the objective's reward as is)
        if references.baseline_rewards is not None and record:
            raise ValueError("reward_baseline is for training: an evaluation (recording) twin bills the raw reward")
        self._baseline_rewards = reference_rows(references.baseline_rewards, rows, "baseline_rewards", self.device)
        if compile_physics:  # (not "compile": TorchRL's env metaclass takes that keyword for itself)
            self._simulate = compiled_physics(self._simulate)

    # ----- construction ----------------------------------------------------------------------
    def _load_tables(self) -> None:
        """The per-step tensors [Y x T, ...] (the years' tables one after the other) every step indexes with the
        envs' rows (year offset + clock): envs/twin_tables.py."""
        self.stacked = stacked_tables(self.series, self.years, self.year_tables, self.device)

    def _make_specs(self) -> None:
        batch = self.batch_size
        size = self.stacked.observation.shape[1]
        self.observation_spec = Composite(
            observation=Unbounded(shape=(*batch, size), dtype=torch.float32, device=self.device), shape=batch
        )
        self.action_spec = Bounded(-1.0, 1.0, shape=(*batch, self.action_size), dtype=torch.float32, device=self.device)
        self.reward_spec = Unbounded(shape=(*batch, 1), dtype=torch.float32, device=self.device)
        flag = Categorical(2, shape=(*batch, 1), dtype=torch.bool, device=self.device)
        self.full_done_spec = Composite(done=flag.clone(), terminated=flag.clone(), truncated=flag.clone(), shape=batch)

    def _allocate_state(self) -> None:
        # A plain holder (envs/twin_state.py): assigning tensors to an EnvBase (an nn.Module) attribute is slow.
        self._state = TwinState(
            envs=self.num_envs,
            sockets=self.sockets,
            hours=self.hours,
            observation_width=self.stacked.observation.shape[1],
            batteries=self.models.batteries,
            record=self.record,
            device=self.device,
        )

    # ----- TorchRL API -----------------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        state, batteries, stacked = self._state, self.models.batteries, self.stacked
        mask = None if tensordict is None else tensordict.get("_reset", None)
        reset = torch.ones(self.num_envs, 1, dtype=torch.bool, device=self.device) if mask is None else mask
        reset = reset.reshape(-1, 1)
        self.resets_done += 1
        first_step, state.next_start = first_steps(
            self.start,
            reset[:, 0],
            state.t,
            state.next_start,
            hours=self.hours,
            episode_hours=self.episode_hours,
            generator=self._start_generator,
        )
        first_row = first_step + self._row_offset
        state.t = torch.where(reset[:, 0], first_step, state.t)
        state.start = torch.where(reset[:, 0], first_step, state.start)
        start = batteries.start_soc.expand(self.num_envs, -1).clone()  # StorageDevice.reset
        if self.start == ZERO:  # CityLearn's own reset (bit-equal): the float32 arrival SOC of the CSV at step 0
            start[:, 1:] = torch.where(stacked.connected[first_row], stacked.arrival_soc[first_row], 0.0)
        else:
            start[:, 1:] = torch.where(stacked.connected[first_row], stacked.session_arrival_soc_f32[first_row], 0.0)
        state.soc = torch.where(reset, start, state.soc)
        if state.capacity is not None:
            state.capacity = torch.where(reset, batteries.capacity, state.capacity)
        peak = torch.zeros_like(state.peak) if self._start_peaks is None else self._start_peaks[first_row]
        state.peak = torch.where(reset[:, 0], peak, state.peak)
        fresh, bands = self._observe(first_row, start[:, 0], start[:, 1:], peak)
        state.observation = torch.where(reset, fresh, state.observation)
        state.keep_bands(reset, bands)
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

    def hour_context(self) -> HourContext:
        """What a controller above the env may read of the hour each env is at ([B] tensors, envs/hour_context.py):
        the very PV, mall load, socket bands and BESS SOC the next step maps its action with."""
        state, stacked = self._state, self.stacked
        row = state.t.clamp_max(self.hours - 1) + self._row_offset
        return HourContext(
            pv_kw=stacked.hourly[row, 0],
            mall_kw=stacked.hourly[row, 1],
            bands=self._bands_at(row, state.soc[:, 1:]) if state.bands is None else state.bands,
            bess_soc=state.soc[:, 0].to(torch.float64),
            in_peak_window=stacked.in_peak_window[row] > 0,
            window_rest_kw=stacked.window_rest_kw[row],
            window_rest_open=stacked.window_rest_open[row],
            bess=self.site_config.bess,
        )

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

    def _set_seed(self, seed: int | None) -> None:
        """Nothing to seed: the twin is deterministic (as the CityLearn env's observations and rewards are)."""

    @property
    def peak_to_date_kw(self) -> torch.Tensor:
        """[B] each env's billed peak-to-date (the ``tariff`` demand charge's base) at the start of its next step."""
        return self._state.peak.clone()

    # ----- the twin on another device (envs/twin_device.py) --------------------------------------
    def to(self, device: str | torch.device) -> IquitosTwin:
        """The twin with its tables, physics constants and state on ``device`` (specs moved by TorchRL's ``to``; why
        a twin is moved rather than built there, and why each tensor by hand: envs/twin_device.py). The carried socket
        bands are dropped: the next step computes them from the moved state, bit for bit what was carried."""
        device = resolved_device(device)
        if device == self.device:
            return self
        super().to(device)
        self.sync_free = device.type != "cpu"
        move_tensors(self._tensor_holders(), device)
        self._state.bands = None
        return self

    def device_bytes(self) -> int:
        """Bytes the twin holds on its device (tables of every year, physics constants, state) plus a step's working
        set: what the memory check counts before a run moves the twin to a GPU (profile/memory_budget.py)."""
        return held_bytes(self._tensor_holders()) + step_working_bytes(self.num_envs, self.sockets)

    def _tensor_holders(self) -> tuple[Any, ...]:
        """Every object whose plain attributes hold the twin's tensors (``nn.Module.to`` reaches none of them)."""
        batteries = self.models.batteries
        curves = (batteries.power_efficiency_curve, batteries.capacity_power_curve)
        return (self, self._state, self.stacked, self.models, batteries, *curves)

    # ----- exact resume (envs/twin_state.py) -----------------------------------------------------
    def resume_state(self) -> dict[str, Any]:
        """Everything the twin's next steps and resets depend on, as CPU tensors and ints (a checkpoint's
        ``weights_only`` load takes it): each env's clock, episode start, next staggered start, SOCs, capacities,
        peak-to-date and last observation (with ``record``: the episode's flows and departures so far), the
        "random" schedule's generator and the reset counter. :meth:`load_resume_state` puts it back, so a run
        resumed from it goes on in the middle of the same episodes (CityLearn cannot: it resumes at a boundary).
        """
        return {
            "tensors": self._state.saved(),
            "start_generator": self._start_generator.get_state(),
            "resets_done": int(self.resets_done),
        }

    def load_resume_state(self, saved: dict[str, Any]) -> None:
        """Continue from :meth:`resume_state`'s ``saved``; a ValueError, naming what differs, when it is of another
        batch, site size or ``record`` setting (nothing is changed then)."""
        self._state.load(saved["tensors"], self.device)
        self._start_generator.set_state(saved["start_generator"])
        self.resets_done = int(saved["resets_done"])

    # ----- KPI tables (record=True; envs/twin_record.py) -----------------------------------------
    def flows(self, env_index: int = 0) -> pd.DataFrame:
        """Hourly energy flows (FLOW_COLUMNS) of env ``env_index``'s steps so far in this episode."""
        self._require_record()
        return flows_frame(self._state, env_index)

    def departures(self, env_index: int = 0) -> pd.DataFrame:
        """One row per EV that left env ``env_index`` so far (DEPARTURE_COLUMNS), by step then socket."""
        self._require_record()
        if len(self.years) > 1:
            raise RuntimeError("departures are read for a twin of one year: build it without years")
        required, battery = self.tables.required_soc, self.series.socket_battery_kwh
        return departures_frame(self._state, self.stacked, required, battery, env_index)

    def _require_record(self) -> None:
        if not self.record:
            raise RuntimeError("build the twin with record=True to read its flows and departures")


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
