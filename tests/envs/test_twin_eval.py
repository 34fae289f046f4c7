"""Evaluation on the twin (``env.backend.evaluate: twin``) scores a policy exactly as evaluation on CityLearn does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torchrl.envs import ExplorationType, set_exploration_type

from iquitos_lightning.agents.networks import initialise_lazy, make_actor
from iquitos_lightning.envs.env_config import Backend, EnvConfig
from iquitos_lightning.envs.factory import make_env, site_env
from iquitos_lightning.envs.objectives import tariff_bill
from iquitos_lightning.envs.twin_gym import TwinGymEnv
from iquitos_lightning.metrics.kpis import compute_kpis

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"  # 7 days: 168 hours


@pytest.mark.parametrize(("actions", "objective"), [("fleet", "tariff"), ("per_socket", "thesis")])
def test_a_policy_evaluated_on_the_twin_gets_citylearns_return_and_kpis(tmp_path, actions, objective) -> None:
    returns, kpis, bills = {}, {}, {}
    torch.manual_seed(3)
    actor = None
    for backend in ("citylearn", "twin"):
        config = EnvConfig(
            site=str(TINY),
            layout=actions,
            objective=objective,
            backend=Backend(evaluate=backend, data_root=str(tmp_path)),
        )
        env = make_env(config, evaluation=True)
        if actor is None:  # one untrained policy (random weights, not zero actions) for both simulators
            actor = make_actor(env, (16, 16), "tanh")
            initialise_lazy(env, actor)
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            rollout = env.rollout(1000, actor, break_when_any_done=True)
        site = site_env(env)
        assert isinstance(site, TwinGymEnv) == (backend == "twin")
        assert rollout.numel() == 168 and bool(rollout["next", "done"][-1])  # the whole episode from hour 0
        returns[backend] = rollout["next", "reward"].sum().item()
        kpis[backend] = compute_kpis(site.flows(), site.departures(), site.site_config)
        bills[backend] = tariff_bill(site.flows(), site.site_config)["tariff_cost"]
    assert returns["twin"] == pytest.approx(returns["citylearn"], rel=1e-5)
    assert bills["twin"] == pytest.approx(bills["citylearn"], rel=1e-6)
    for name, value in kpis["citylearn"].items():
        assert kpis["twin"][name] == pytest.approx(value, rel=1e-5, abs=1e-6), name
    assert kpis["twin"]["ev_energy_served_kwh"] > 0 and np.isfinite(returns["twin"])


def test_the_evaluation_backend_is_checked() -> None:
    with pytest.raises(ValueError, match="backend.evaluate must be one of"):
        EnvConfig(backend=Backend(evaluate="gym"))
