"""Where a training episode's billed peak-to-date starts: at the value a reference run of the year has there.

Why: the ``tariff`` reward charges each rise of the month-to-date peak-window import (envs/objectives.py). A
training twin whose episodes start mid-month (``start: staggered|random``) used to start that peak at 0, so the
first evening of every episode paid the whole month's demand charge again (-65 to -76 reward in one step on
the default site) and each 720-h episode paid about two such rises where the evaluation year, run from hour 0,
pays one a month. Those steps were most of a training episode's return (measured: docs/control.md), a cost the
evaluated policy never sees. Starting the peak where a reasonable controller has it at that hour of the year
keeps the reward's demand term what it is in evaluation: a rise is paid only for importing more than that.

The reference is the ``shaver_residual`` layout's zero action, the peak shaver of envs/shaver_prior.py (75.9 %
of the tariff gap by itself, the best controller the envs hold), run once over the year in a one-env twin from
hour 0 with the training twin's site, demand period and EV guarantee. Its peak at each step is a function of
those alone, so it is computed once and kept beside the site (envs/reference_runs.py).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from tensordict import TensorDict

from iquitos_lightning.site.series import SiteSeries

REFERENCE_PEAK = "reference"  # the reference run's peak at the episode's first step
ZERO_PEAK = "zero"  # 0 (a fresh month), whatever the hour: the behaviour before start_peak existed
START_PEAKS = (REFERENCE_PEAK, ZERO_PEAK)


def check_start_peak(start_peak: str) -> str:
    if start_peak not in START_PEAKS:
        raise ValueError(f"env.training.start_peak must be one of {START_PEAKS}, got {start_peak!r}")
    return start_peak


class PeakTracker(Protocol):
    """What :func:`peak_at_each_step` runs: a one-env twin (envs/twin.py) seen through the TorchRL API."""

    hours: int
    action_size: int

    def reset(self) -> TensorDict: ...

    def step(self, tensordict: TensorDict) -> TensorDict: ...

    @property
    def peak_to_date_kw(self) -> torch.Tensor: ...


def peak_at_each_step(env: PeakTracker) -> np.ndarray:
    """[T] float64: the env's billed peak-to-date at the start of every step of one episode of the zero action."""
    env.reset()
    action = TensorDict({"action": torch.zeros(1, env.action_size)}, batch_size=[1])
    peaks = np.empty(env.hours)
    for step in range(env.hours):
        peaks[step] = float(env.peak_to_date_kw[0])
        env.step(action)
    return peaks


def reference_key(schema_path: Path, series: SiteSeries, *options: object) -> str:
    """A digest of everything the reference run depends on: the schema's physics, the series and ``options``."""
    digest = hashlib.sha256(Path(schema_path).read_bytes())
    for values in (series.pv_kw, series.mall_kw, series.price_per_kwh, series.sessions.to_numpy(dtype=float)):
        digest.update(np.ascontiguousarray(values, dtype=float).tobytes())
    digest.update(repr((series.config, *options)).encode())
    return digest.hexdigest()
