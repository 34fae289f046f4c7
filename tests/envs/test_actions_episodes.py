"""The EV guarantee over whole episodes of the tiny site, in CityLearn, in the twin and under an untrained agent,
for every action layout (the hand-worked numbers of envs/actions.py are in test_actions.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.bench.equivalence import twin_trajectories
from iquitos_lightning.agents import PPO, EnvConfig, RolloutConfig
from iquitos_lightning.envs.actions import (
    FLEET,
    LAYOUTS,
    PER_SOCKET,
    unavoidable_unmet_kwh,
)
from iquitos_lightning.envs.citylearn import make_iquitos_env
from iquitos_lightning.envs.env_config import Backend
from iquitos_lightning.envs.factory import site_env
from iquitos_lightning.envs.twin import make_twin
from iquitos_lightning.metrics.kpis import compute_kpis

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"
# EV energy (kWh over the tiny site's week) a guaranteed policy may leave unmet beyond the unavoidable part:
# float32 SOC rounding only.
UNMET_TOLERANCE_KWH = 1e-4


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_random_policy_leaves_no_avoidable_ev_energy_unmet_in_citylearn_and_the_twin(
    data_root: Path, layout: str
) -> None:
    env = make_iquitos_env(TINY, data_root=data_root, layout=layout)
    unavoidable = unavoidable_unmet_kwh(env.series)
    rng = np.random.default_rng(5)
    actions = rng.uniform(-1, 1, (env.hours, env.action_space.shape[0])).astype(np.float32)
    env.reset()
    for action in actions:
        env.step(action)
    kpis = compute_kpis(env.flows(), env.departures(), env.site_config)
    assert kpis["ev_energy_served_kwh"] > 0 and kpis["ev_departures"] > 10
    assert kpis["ev_unmet_kwh"] == pytest.approx(unavoidable, abs=UNMET_TOLERANCE_KWH)

    twin = make_twin(TINY, data_root=data_root, layout=layout, record=True, num_envs=2)
    both = np.stack([actions, rng.uniform(-1, 1, actions.shape).astype(np.float32)])
    for run in twin_trajectories(twin, both):
        assert run.kpis["ev_unmet_kwh"] == pytest.approx(unavoidable, abs=UNMET_TOLERANCE_KWH)

    # Without the guarantee the same random policy leaves EVs short: the test can fail.
    unguarded = make_iquitos_env(TINY, data_root=data_root, layout=layout, ev_guarantee=False)
    unguarded.reset()
    for action in -np.abs(actions):
        unguarded.step(action)
    short = compute_kpis(unguarded.flows(), unguarded.departures(), unguarded.site_config)["ev_unmet_kwh"]
    assert short > unavoidable + 1.0


def test_an_untrained_agents_deterministic_policy_charges_half_way_not_zero(data_root: Path) -> None:
    """Its mean action is about 0: the middle of every band, never a dead zone of 'no charge'."""
    torch.manual_seed(0)
    hours = make_iquitos_env(TINY, data_root=data_root).hours
    config = EnvConfig(site=str(TINY), ev_guarantee=False, backend=Backend(data_root=str(data_root)))
    agent = PPO(env=config, rollout=RolloutConfig(frames_per_batch=hours, eval_every_frames=hours), hidden_sizes=(32,))
    _, rollout = agent.evaluate_episode(0)
    env = site_env(agent.eval_env)
    served = compute_kpis(env.flows(), env.departures(), env.site_config)["ev_energy_served_kwh"]
    full = make_iquitos_env(TINY, data_root=data_root, ev_guarantee=False)
    full.reset()
    while full.time_step < full.hours:
        full.step(np.ones(full.action_space.shape))
    full_served = compute_kpis(full.flows(), full.departures(), full.site_config)["ev_energy_served_kwh"]
    socket_actions = rollout["action"][:, 1:]
    assert float(socket_actions.abs().mean()) < 0.5  # an untrained policy's mean is near 0
    assert served > 0.3 * full_served  # about half power on every plugged socket, not nothing

    # With the guarantee on (the default) the same policy serves every EV up to the unavoidable part.
    guarded = PPO(
        env=EnvConfig(site=str(TINY), layout=FLEET, backend=Backend(data_root=str(data_root))),
        rollout=RolloutConfig(frames_per_batch=hours, eval_every_frames=hours),
        hidden_sizes=(32,),
    )
    _, fleet_rollout = guarded.evaluate_episode(0)
    assert fleet_rollout["action"].shape[-1] == 2
    env = site_env(guarded.eval_env)
    kpis = compute_kpis(env.flows(), env.departures(), env.site_config)
    assert kpis["ev_unmet_kwh"] == pytest.approx(unavoidable_unmet_kwh(env.series), abs=UNMET_TOLERANCE_KWH)
    assert PER_SOCKET in LAYOUTS
