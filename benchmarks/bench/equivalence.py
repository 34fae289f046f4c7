"""Run the same actions through CityLearn and through the twin, and measure how far apart they end up.

Why in the package: the equivalence test (tiny site, every CI run) and the bench script (a long
stretch of the default site) must compare the two simulators the same way. CityLearn is run
first with any action source (random, a reference controller reading ``env.state()``, or a
policy reading the observation); the actions it took are then replayed through B envs of the
twin at once, and per-step observations, rewards and the episode KPIs are compared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tensordict import TensorDict

from iquitos_lightning.envs.citylearn import IquitosEnv
from iquitos_lightning.envs.state import SiteState
from iquitos_lightning.envs.twin import IquitosTwin
from iquitos_lightning.metrics.kpis import compute_kpis

# What chooses CityLearn's action: (observation, physical state) -> action vector.
ActionSource = Callable[[np.ndarray, SiteState], np.ndarray]


@dataclass
class Trajectory:
    """One episode (or its first ``len(rewards)`` steps) as a simulator produced it."""

    actions: np.ndarray  # [T, A] float32, what was sent
    observations: np.ndarray  # [T + 1, O] float32, from the reset on
    rewards: np.ndarray  # [T] float64 (CityLearn) or float32 (twin)
    flows: pd.DataFrame
    departures: pd.DataFrame
    kpis: dict[str, float]


def citylearn_trajectory(env: IquitosEnv, act: ActionSource, steps: int | None = None) -> Trajectory:
    """Reset ``env`` and step it ``steps`` times (whole episode by default) with the actions of ``act``."""
    steps = env.hours if steps is None else min(steps, env.hours)
    observation, _ = env.reset()
    observations, actions, rewards = [observation], [], []
    for _ in range(steps):
        action = np.asarray(act(observation, env.state()), dtype=np.float32)
        observation, reward, _, _, _ = env.step(action)
        actions.append(action)
        observations.append(observation)
        rewards.append(reward)
    flows, departures = env.flows(), env.departures()
    return Trajectory(
        actions=np.stack(actions),
        observations=np.stack(observations),
        rewards=np.asarray(rewards),
        flows=flows,
        departures=departures,
        kpis=compute_kpis(flows, departures, env.site_config),
    )


def twin_trajectories(twin: IquitosTwin, actions: np.ndarray) -> list[Trajectory]:
    """Reset the twin (``record=True``) and replay ``actions`` [B, T, A], one sequence per env."""
    envs, steps, _ = actions.shape
    if envs != twin.num_envs:
        raise ValueError(f"{envs} action sequences for a twin of {twin.num_envs} envs")
    observations = [twin.reset()["observation"]]
    rewards = []
    for t in range(steps):
        action = torch.as_tensor(actions[:, t], dtype=torch.float32, device=twin.device)
        result = twin.step(TensorDict({"action": action}, batch_size=twin.batch_size, device=twin.device))["next"]
        observations.append(result["observation"])
        rewards.append(result["reward"][:, 0])
    observation_array = torch.stack(observations, 1).cpu().numpy()
    reward_array = torch.stack(rewards, 1).cpu().numpy()
    trajectories = []
    for index in range(envs):
        flows, departures = twin.flows(index), twin.departures(index)
        trajectories.append(
            Trajectory(
                actions=actions[index],
                observations=observation_array[index],
                rewards=reward_array[index],
                flows=flows,
                departures=departures,
                kpis=compute_kpis(flows, departures, twin.site_config),
            )
        )
    return trajectories


def max_relative_error(reference: np.ndarray, other: np.ndarray) -> float:
    """max |a - b| / max(|a|, |b|) over the entries where either is non-zero (0 when all are equal)."""
    reference = np.asarray(reference, dtype=np.float64)
    other = np.asarray(other, dtype=np.float64)
    scale = np.maximum(np.abs(reference), np.abs(other))
    nonzero = scale > 0
    return float((np.abs(reference - other)[nonzero] / scale[nonzero]).max(initial=0.0))


def kpi_relative_differences(reference: dict[str, float], other: dict[str, float], floor: float = 1e-6) -> dict:
    """|a - b| / max(|a|, floor) per KPI (the floor keeps ~0 KPIs such as the balance residual meaningful)."""
    return {name: abs(reference[name] - other[name]) / max(abs(reference[name]), floor) for name in reference}


def compare(reference: Trajectory, other: Trajectory) -> dict[str, float]:
    """The largest relative errors of ``other`` against ``reference``: observations, rewards, flows, KPIs."""
    if len(reference.rewards) != len(other.rewards):
        raise ValueError("trajectories of different lengths")
    kpi_errors = kpi_relative_differences(reference.kpis, other.kpis)
    kpi_errors.pop("energy_balance_max_error_kw")  # a float32 residual of ~1e-6 kW, not a result
    departures = [
        run.departures.sort_values(["departure_step", "socket"]).to_numpy(float) for run in (reference, other)
    ]
    return {
        "observation": max_relative_error(reference.observations, other.observations),
        "reward": max_relative_error(reference.rewards, other.rewards),
        "flows": max_relative_error(reference.flows.to_numpy(), other.flows.to_numpy()),
        "departures": max_relative_error(*departures) if departures[0].shape == departures[1].shape else np.inf,
        "kpi": max(kpi_errors.values()),
    }
