"""The residual wrapper (control/residual.py) on the tiny site: a zero agent action is the controller's own run, bit for
bit, on the twin, for every controller a residual or a reference run uses; CityLearn and the twin step the same
wrapped env alike; and a residual the agent does send changes what happens."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from tensordict import TensorDict
from torchrl.envs import EnvBase

from iquitos_lightning.control.fleet_rule import FleetRule
from iquitos_lightning.control.peak_shaver import PeakShaver
from iquitos_lightning.control.references import Controller, RuleBasedController
from iquitos_lightning.control.residual import Prior, SiteStatePrior, prior_named, residual_around, with_residual
from iquitos_lightning.control.rollout import run_controller
from iquitos_lightning.control.tariff_rule import TariffRuleController
from iquitos_lightning.envs.actions import FLEET, PER_SOCKET
from iquitos_lightning.envs.citylearn import make_iquitos_env
from iquitos_lightning.envs.env_config import EnvConfig
from iquitos_lightning.envs.gym_env import FlatGymEnv
from iquitos_lightning.envs.twin import IquitosTwin, make_twin
from iquitos_lightning.envs.twin_site import TwinSite
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.metrics.kpis import compute_kpis

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


def _step_all(env: EnvBase, actions: Callable[[int], torch.Tensor], hours: int) -> np.ndarray:
    """Reset ``env`` (one env, batch [1]) and step it ``hours`` times; the float32 rewards."""
    env.reset()
    rewards = []
    for step in range(hours):
        result = env.step(TensorDict({"action": actions(step)}, batch_size=env.batch_size))["next"]
        rewards.append(float(result["reward"].reshape(-1)[0]))
    return np.array(rewards)


def _zero_residual_run(twin: IquitosTwin, prior: Prior, layout: str) -> tuple[pd.DataFrame, np.ndarray]:
    zero = torch.zeros(1, twin.action_size)
    rewards = _step_all(with_residual(twin, prior, layout), lambda step: zero, twin.hours)
    return twin.flows(0), rewards


@pytest.mark.parametrize(
    ("prior", "objective"), [(FleetRule(), "thesis"), (FleetRule(), "tariff"), (PeakShaver(), "tariff")]
)
def test_a_zero_residual_around_a_batched_controller_is_its_own_run(data_root: Path, prior: Prior, objective: str):
    """The rule (``env.residual: rule``, the committed residual profiles') and the peak shaver (the start peaks'
    reference run) sent as they are, against the wrapper around them with the agent at 0: the same flows and
    rewards to the bit."""
    own = make_twin(TINY, data_root=data_root, record=True, layout=FLEET, objective=objective)
    own_rewards = _step_all(own, lambda step: prior.act(own.hour_context()), own.hours)
    twin = make_twin(TINY, data_root=data_root, record=True, layout=FLEET, objective=objective)
    flows, rewards = _zero_residual_run(twin, prior, FLEET)
    pd.testing.assert_frame_equal(flows, own.flows(0), check_exact=True)
    np.testing.assert_array_equal(rewards, own_rewards)
    assert flows["bess_charge_kw"].sum() > 0  # the controller ran the battery (the comparison is not vacuous)


@pytest.mark.parametrize(
    ("make_controller", "objective"),
    [(lambda series: RuleBasedController(series.config), "thesis"), (TariffRuleController, "tariff")],
)
def test_a_zero_residual_around_any_reference_controller_is_its_own_run(
    data_root: Path, make_controller: Callable[..., Controller], objective: str
):
    """The rule-based controller and the tariff rule (``act(SiteState)``, per socket, one env) run by
    control/rollout.py, against the wrapper around them with the agent at 0: the same flows to the bit."""
    own = make_twin(TINY, data_root=data_root, record=True, objective=objective)
    reference = run_controller(TwinSite(own), make_controller(own.series))
    twin = make_twin(TINY, data_root=data_root, record=True, objective=objective)
    prior = SiteStatePrior(make_controller(twin.series), TwinSite(twin))
    flows, _ = _zero_residual_run(twin, prior, PER_SOCKET)
    pd.testing.assert_frame_equal(flows, reference.flows, check_exact=True)
    assert compute_kpis(flows, twin.departures(0), twin.site_config) == reference.kpis


def test_the_agent_acts_around_the_controller_and_sees_its_own_action(data_root: Path) -> None:
    """A residual moves the run off the controller, its ends are the action's bounds, and what an agent collects
    under the wrapper is its own action, not the mapped one."""
    rule = FleetRule()
    baseline = make_twin(TINY, data_root=data_root, record=True, layout=FLEET)
    _zero_residual_run(baseline, rule, FLEET)
    pushed = make_twin(TINY, data_root=data_root, record=True, layout=FLEET)
    env = with_residual(pushed, rule, FLEET)
    env.reset()
    agent_action = torch.tensor([[0.5, -0.5]])
    for _ in range(pushed.hours):
        stepped = env.step(TensorDict({"action": agent_action.clone()}, batch_size=[1]))
        assert torch.equal(stepped["action"], agent_action)
    assert not pushed.flows(0).equals(baseline.flows(0))
    # +1 / -1 is the bound whatever the rule does: the same run as the plain fleet layout's (+1, -1)
    bounds = make_twin(TINY, data_root=data_root, record=True, layout=FLEET)
    _step_all(with_residual(bounds, rule, FLEET), lambda step: torch.tensor([[1.0, -1.0]]), bounds.hours)
    plain = make_twin(TINY, data_root=data_root, record=True, layout=FLEET)
    _step_all(plain, lambda step: torch.tensor([[1.0, -1.0]]), plain.hours)
    pd.testing.assert_frame_equal(bounds.flows(0), plain.flows(0), check_exact=True)


@pytest.mark.parametrize("objective", ["thesis", "tariff"])
def test_citylearn_and_the_twin_step_a_residual_agent_alike(data_root: Path, objective: str) -> None:
    """The wrapper around the rule on CityLearn (through the Gymnasium stack agents evaluate on) and on the twin, with
    the same random residuals: observations and flows bit-equal, rewards to the float32 cast."""
    rng = np.random.default_rng(3)
    residuals = torch.as_tensor(rng.uniform(-1.0, 1.0, (168, 2)), dtype=torch.float32)
    city = make_iquitos_env(TINY, data_root=data_root, layout=FLEET, objective=objective)
    city_rewards = _step_all(with_residual(FlatGymEnv(city), FleetRule(), FLEET), lambda t: residuals[t], city.hours)
    twin = make_twin(TINY, data_root=data_root, record=True, layout=FLEET, objective=objective)
    twin_rewards = _step_all(with_residual(twin, FleetRule(), FLEET), lambda t: residuals[t][None], twin.hours)
    np.testing.assert_array_equal(twin.flows(0).to_numpy(), city.flows().to_numpy())
    np.testing.assert_allclose(twin_rewards, city_rewards, rtol=1e-6)


def test_a_residual_names_a_known_controller_in_its_layout(data_root: Path) -> None:
    assert isinstance(prior_named("rule"), FleetRule) and isinstance(prior_named("shaver"), PeakShaver)
    with pytest.raises(ValueError, match="env.residual must be one of"):
        prior_named("optimum")
    twin = make_twin(TINY, data_root=data_root)  # per_socket
    with pytest.raises(ValueError, match="acts in the 'fleet' layout"):
        with_residual(twin, FleetRule(), PER_SOCKET)
    with pytest.raises(ConfigError, match="env: the 'rule' controller acts in the 'fleet' layout, the env in 'per_s"):
        residual_around(twin, EnvConfig(site=str(TINY), residual="rule"))  # actions: per_socket (the default)
    assert residual_around(twin, EnvConfig(site=str(TINY))) is twin  # no residual: the env as it is
    with pytest.raises(ConfigError, match="residual .* needs the Iquitos site"):
        EnvConfig(name="Pendulum-v1", residual="rule")


def test_the_rule_in_the_fleet_layout_is_the_rule_based_controller(data_root: Path) -> None:
    """``env.residual: rule``'s controller (control/fleet_rule.py) and the per-socket rule-based reference are one
    rule: the same year's KPIs to 1e-6 (the two share EV power between sockets in different floating-point steps)."""
    own = make_twin(TINY, data_root=data_root, record=True)
    reference = run_controller(TwinSite(own), RuleBasedController(own.series.config))
    twin = make_twin(TINY, data_root=data_root, record=True, layout=FLEET)
    flows, _ = _zero_residual_run(twin, FleetRule(), FLEET)
    kpis = compute_kpis(flows, twin.departures(0), twin.site_config)
    for name in ("grid_import_kwh", "co2_kg", "cost", "peak_import_kw", "ev_energy_served_kwh"):
        assert kpis[name] == pytest.approx(reference.kpis[name], rel=1e-6, abs=1e-6), name
    assert kpis["bess_equivalent_full_cycles"] == pytest.approx(reference.kpis["bess_equivalent_full_cycles"], rel=1e-6)
