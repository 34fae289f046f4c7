"""The reference runs a training twin reads as tables: the peak shaver's start peaks, a baseline controller's rewards.

Why here, above the env: a reference run runs a controller (the peak shaver of control/peak_shaver.py, the rule of
control/fleet_rule.py, or the uncontrolled constant action) over each year of a training twin from hour 0, in a
one-env twin of that year, and the env runs no controller. The series are handed to the training twin as
:class:`~iquitos_lightning.envs.reference_tables.ReferenceTables` (envs/factory.py ``make_env(references=...)``).

- ``start_peak: reference`` (envs/start_peak.py): the billed peak-to-date at the start of every step of the peak
  shaver's run with the twin's demand period, EV guarantee and forecasts, in the ``fleet`` layout through the
  residual wrapper with a zero action (control/residual.py);
- ``reward_baseline`` (envs/reward_baseline.py): the reward at every step of the uncontrolled controller (the
  ``fleet`` action (0, +1): BESS idle, every socket at the top of its band) or of the rule-based controller, with the
  twin's objective, demand period and EV guarantee.

Each year's run depends on the site files, the series, those options and the code alone, so it is kept on disk beside
the site (control/reference_runs.py) and the next fit reads it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tensordict import TensorDict
from torchrl.envs import EnvBase

from iquitos_lightning.control.fleet_rule import FleetRule
from iquitos_lightning.control.peak_shaver import PeakShaver
from iquitos_lightning.control.reference_runs import cached_reference, cached_references
from iquitos_lightning.control.residual import Prior, with_residual
from iquitos_lightning.envs import objectives
from iquitos_lightning.envs.actions import FLEET
from iquitos_lightning.envs.factory import EnvConfig, training_site
from iquitos_lightning.envs.reference_tables import NO_REFERENCES, ReferenceTables, needs_start_peaks
from iquitos_lightning.envs.reward import RewardWeights
from iquitos_lightning.envs.reward_baseline import NO_BASELINE, RULE
from iquitos_lightning.envs.site_data import LoadedSite
from iquitos_lightning.envs.site_tables import COMPACT
from iquitos_lightning.envs.twin import IquitosTwin
from iquitos_lightning.site.config import SiteConfig
from iquitos_lightning.site.series import SiteSeries

UNCONTROLLED_FLEET_ACTION = (0.0, 1.0)  # the fleet layout's BESS idle, every socket at the top of its band
ZERO_RESIDUAL = (0.0, 0.0)  # a residual agent's action that is its controller's


def reference_tables(config: EnvConfig, site: LoadedSite | None = None) -> ReferenceTables:
    """The tables ``config``'s training twin needs (none but for a twin-backend Iquitos run whose
    ``training.start_peak`` or ``training.reward_baseline`` asks for them), one value per row of its stacked years;
    ``site``: the twin's site and years as its builder loaded them (envs/factory.py ``training_site``), else loaded
    here."""
    if not config.on_twin:
        return NO_REFERENCES
    aids = config.training
    peaks = needs_start_peaks(aids.start_peak, aids.start, config.objective)
    if not peaks and aids.reward_baseline == NO_BASELINE:
        return NO_REFERENCES
    site = site or training_site(config)
    years = site.training_series
    options = RunOptions(
        Path(site.schema_path), config.ev_guarantee, config.objective, config.demand_period, config.forecasts
    )
    return ReferenceTables(
        start_peaks=np.concatenate(start_peaks(options, years)) if peaks else None,
        baseline_rewards=(
            np.concatenate([baseline_rewards(options, year, aids.reward_baseline) for year in years])
            if aids.reward_baseline != NO_BASELINE
            else None
        ),
    )


@dataclass(frozen=True)
class RunOptions:
    """What a reference run of a year depends on besides the year: the site's physics and the twin's options."""

    schema_path: Path
    ev_guarantee: bool
    objective: str
    demand_period: str
    forecasts: str


def start_peaks(options: RunOptions, years: Sequence[SiteSeries]) -> list[np.ndarray]:
    """[T] for each of ``years``: the billed peak-to-date at the start of every step of the peak shaver's run of that
    year from hour 0, for ``options.demand_period``.

    One run of a year serves both demand periods: the shaver's actions never read the billed peak, so its run, and
    each hour's grid import, is the same whichever period bills it; the peaks of each period follow from the imports
    by the twin's own recurrence (:func:`peaks_to_date`), and both are kept. A card profile billed by the month
    (PPO, A2C) and one trained on the day's charge (SAC) share the run: on the 2-core machine ~20-25 s less at the
    first fit of the second. The years not yet run are run together, in one twin of one env a year (env b simulates
    year b): four years take about the time of one (~38 s instead of ~105 s). The peaks are physics, no reward or
    observation scale enters them, so a year's peaks in the batch are bit-equal to its run alone, and each period's to
    the peak-to-date of a twin billed by that period (tests/control/test_reference_runs.py)."""
    periods = objectives.DEMAND_PERIODS
    keys = [
        reference_key(options.schema_path, year, period, options.ev_guarantee, options.forecasts)
        for period in periods
        for year in years
    ]

    def run(missing: list[int]) -> list[np.ndarray]:
        to_run = sorted({index % len(years) for index in missing})
        imports = dict(zip(to_run, shaver_grid_imports(options, [years[index] for index in to_run]), strict=True))
        return [
            peaks_to_date(imports[index % len(years)], years[index % len(years)].config, periods[index // len(years)])
            for index in missing
        ]

    values = cached_references(options.schema_path, "peaks", keys, run)
    chosen = periods.index(objectives.check_demand_period(options.demand_period)) * len(years)
    return values[chosen : chosen + len(years)]


def shaver_grid_imports(options: RunOptions, years: Sequence[SiteSeries]) -> np.ndarray:
    """[Y, T] float64: the grid import of every hour of the peak shaver's run of each of ``years`` from hour 0, in one
    twin of one env a year (the ``fleet`` layout through the residual wrapper with a zero action)."""
    twin = IquitosTwin(
        options.schema_path,
        years[0],
        num_envs=len(years),
        years=years,
        record=True,
        layout=FLEET,
        ev_guarantee=options.ev_guarantee,
        objective=objectives.TARIFF,
        forecasts=options.forecasts,
    )
    run_constant_action(with_residual(twin, PeakShaver(), FLEET), ZERO_RESIDUAL, twin.hours)
    return np.stack([twin.flows(env)["grid_import_kw"].to_numpy() for env in range(len(years))])


def peaks_to_date(grid_import_kw: np.ndarray, site: SiteConfig, demand_period: str) -> np.ndarray:
    """[T] the billed peak-to-date at the start of every hour of a run of ``site``'s year whose hourly grid imports
    are ``grid_import_kw`` [T], billed by ``demand_period``: the twin's recurrence (envs/twin.py ``_simulate``) in
    the same float64 operations (:func:`~iquitos_lightning.envs.objectives.next_peak_to_date`: not an exact running
    max), from 0 at hour 0 and back to 0 where a period opens."""
    hours = len(grid_import_kw)
    in_window = objectives.peak_window_steps(site, hours).astype(float)
    opens = objectives.demand_period_starts(site, hours, demand_period)
    peaks = np.empty(hours)
    peak = np.float64(0.0)
    for step in range(hours):
        peaks[step] = peak
        peak = objectives.next_peak_to_date(grid_import_kw[step], peak, in_window[step])
        if step + 1 < hours and opens[step + 1]:
            peak = np.float64(0.0)
    return peaks


def baseline_rewards(options: RunOptions, year: SiteSeries, baseline: str) -> np.ndarray:
    """[T] the reward of every step of the baseline controller's run of ``year`` from hour 0 (``uncontrolled``: the
    ``fleet`` action (0, +1); ``rule``: the rule-based controller), scored on the year's own reward scales."""
    weights, tariff_weights = RewardWeights(), objectives.TariffWeights()
    key_options = (options.objective, options.demand_period, options.ev_guarantee, weights, tariff_weights)

    def run() -> np.ndarray:
        twin = IquitosTwin(
            options.schema_path,
            year,
            weights,
            layout=FLEET,
            ev_guarantee=options.ev_guarantee,
            objective=options.objective,
            tariff_weights=tariff_weights,
            demand_period=options.demand_period,
            observation=COMPACT,
        )
        prior: Prior | None = FleetRule() if baseline == RULE else None
        env = twin if prior is None else with_residual(twin, prior, FLEET)
        action = ZERO_RESIDUAL if prior is not None else UNCONTROLLED_FLEET_ACTION
        return run_constant_action(env, action, twin.hours)[0]

    key = reference_key(options.schema_path, year, baseline, *key_options)
    return cached_reference(options.schema_path, "rewards", key, run)


def run_constant_action(env: EnvBase, action: tuple[float, float], hours: int) -> np.ndarray:
    """[B, T] float64: the reward of every step of one episode of each of the B envs of ``env`` from hour 0, all with
    one action throughout."""
    env.reset()
    envs = env.batch_size[0]
    command = TensorDict({"action": torch.tensor([action] * envs)}, batch_size=[envs])
    rewards = np.empty((envs, hours))
    for step in range(hours):
        rewards[:, step] = env.step(command)["next", "reward"][:, 0].to(torch.float64).numpy()
    return rewards


def reference_key(schema_path: Path, series: SiteSeries, *options: object) -> str:
    """A digest of everything the reference run depends on: the schema's physics, the series and ``options``."""
    digest = hashlib.sha256(Path(schema_path).read_bytes())
    for values in (series.pv_kw, series.mall_kw, series.price_per_kwh, series.sessions.to_numpy(dtype=float)):
        digest.update(np.ascontiguousarray(values, dtype=float).tobytes())
    digest.update(repr((series.config, *options)).encode())
    return digest.hexdigest()
