"""Series of reference runs a training twin reads, handed to it as tables: start peaks and reward baselines.

Why tables: the twin is the control problem and runs no controller. What a training episode needs from a reference
run of each of its years (the month-to-date peak a mid-month start begins with, ``env.training.start_peak``,
envs/start_peak.py; the reward a baseline controller earns at each hour, ``env.training.reward_baseline``,
envs/reward_baseline.py) is computed above it, by the controllers of ``control/`` (control/training_references.py),
and handed in as arrays, as the site's own series are (envs/site_tables.py). :func:`missing_references` lets the env
factory refuse a twin whose options need a table it was not given, rather than train on a silent 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iquitos_lightning.envs.objectives import TARIFF
from iquitos_lightning.envs.reward_baseline import NO_BASELINE
from iquitos_lightning.envs.start_peak import REFERENCE_PEAK

ZERO_START = "zero"  # the twin's start schedule from hour 0 (CityLearn's episode): the peak truly is 0 there


@dataclass(frozen=True)
class ReferenceTables:
    """[Y x T] float64 series, the twin's years one after the other (as its own tables are stacked); None: not used."""

    start_peaks: np.ndarray | None = None  # the billed peak-to-date at the start of each step of the reference run
    baseline_rewards: np.ndarray | None = None  # the baseline controller's reward at each step


NO_REFERENCES = ReferenceTables()


def needs_start_peaks(start_peak: str, start: str, objective: str) -> bool:
    """Whether a twin with these options starts its episodes' peaks from a reference run: ``start_peak: reference``
    on ``tariff`` with episodes that may start after hour 0."""
    return start_peak == REFERENCE_PEAK and start != ZERO_START and objective == TARIFF


def missing_references(
    references: ReferenceTables, *, start_peak: str, start: str, objective: str, reward_baseline: str
) -> list[str]:
    """The tables a twin with these options needs and ``references`` lacks (named as the options that need them)."""
    missing = []
    if needs_start_peaks(start_peak, start, objective) and references.start_peaks is None:
        missing.append("start_peak: reference (the reference run's start peaks)")
    if reward_baseline != NO_BASELINE and references.baseline_rewards is None:
        missing.append(f"reward_baseline: {reward_baseline} (the baseline controller's rewards)")
    return missing
