"""Run one controller through the site environment for a whole episode and measure it.

Why here: the references, the LP replay and (later) the learned agents are all scored the same
way: step the same environment from reset to the end, then read the flows and departures it
recorded and pass them to :func:`~iquitos_lightning.metrics.kpis.compute_kpis`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from iquitos_lightning.control.references import Controller
from iquitos_lightning.metrics.kpis import compute_kpis


@dataclass
class RolloutResult:
    """One controller's episode: what flowed, who left with what, and the KPIs of both."""

    controller: str
    flows: pd.DataFrame
    departures: pd.DataFrame
    kpis: dict[str, float]
    steps: int
    seconds: float


def run_controller(
    env: Any,
    controller: Controller,
    *,
    on_step: Callable[[], None] | None = None,
) -> RolloutResult:
    """Reset ``env`` and step it with ``controller`` until the episode ends.

    ``env`` is an :class:`~iquitos_lightning.envs.citylearn.IquitosEnv` (typed loosely so this
    module does not import CityLearn); ``on_step`` is called after every step (progress bars).
    """
    started = time.perf_counter()
    env.reset()
    steps = 0
    done = False
    while not done:
        action = np.asarray(controller.act(env.state()), dtype=np.float32)
        _, _, terminated, truncated, _ = env.step(action)
        done = bool(terminated or truncated)
        steps += 1
        if on_step is not None:
            on_step()
    flows = env.flows()
    departures = env.departures()
    return RolloutResult(
        controller=controller.name,
        flows=flows,
        departures=departures,
        kpis=compute_kpis(flows, departures, env.site_config),
        steps=steps,
        seconds=time.perf_counter() - started,
    )
