"""The collection-time sampler writes exactly what the TanhNormal actor writes, for a fraction of the cost."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import TanhNormal

from iquitos_lightning.agents import EnvConfig
from iquitos_lightning.agents.networks import initialise_lazy, make_actor
from iquitos_lightning.envs.factory import make_env
from iquitos_lightning.fastpath.tanh_normal import (
    DeterministicTanhNormalPolicy,
    TanhNormalSampler,
    collection_policy,
    evaluation_policy,
    log_prob,
    rsample_and_log_prob,
    squashing_bounds,
)


def _actor(env_name: str, *, return_log_prob: bool = True, policy_scale: str = "state"):
    env = make_env(EnvConfig(name=env_name))
    actor = make_actor(env, (16, 16), "tanh", return_log_prob=return_log_prob, policy_scale=policy_scale)
    initialise_lazy(env, actor)
    return env, actor


def _observations(env, rows: int) -> TensorDict:
    generator = torch.Generator().manual_seed(1)
    size = env.observation_spec["observation"].shape[-1]
    # Large values too: the tanh saturates and the safe clamp decides the action.
    observation = (
        torch.randn(rows, size, generator=generator) * torch.tensor([1.0, 30.0]).repeat_interleave(rows // 2)[:, None]
    )
    return TensorDict({"observation": observation}, batch_size=[rows])


def _both(actor, sampler, observations: TensorDict, exploration: ExplorationType):
    outputs = []
    for module in (actor, sampler):
        torch.manual_seed(7)
        with torch.no_grad(), set_exploration_type(exploration):
            outputs.append(module(observations.clone()))
    return outputs


@pytest.mark.parametrize("env_name", ["Pendulum-v1", "MountainCarContinuous-v0"])
@pytest.mark.parametrize("return_log_prob", [True, False])
@pytest.mark.parametrize("policy_scale", ["state", "parameter"])  # SAC's; PPO's and A2C's learned log-std
def test_random_samples_and_log_probs_equal_the_actor_bit_for_bit(
    env_name: str, return_log_prob: bool, policy_scale: str
) -> None:
    # bounds [-2, 2] (affine) and [-1, 1] (none)
    env, actor = _actor(env_name, return_log_prob=return_log_prob, policy_scale=policy_scale)
    if policy_scale == "parameter":
        with torch.no_grad():
            actor.module[0].module[1].state_independent_scale.fill_(-0.7)  # a log-std other than the initial 0
    sampler = TanhNormalSampler(actor)
    expected, fast = _both(actor, sampler, _observations(env, 64), ExplorationType.RANDOM)
    assert set(fast.keys()) == set(expected.keys())
    keys = ["loc", "scale", "action"] + (["action_log_prob"] if return_log_prob else [])
    for key in keys:
        assert torch.equal(fast[key], expected[key]), key
    assert (fast["action"].abs() < 1.0 * env.action_spec.space.high).all()  # never exactly on a bound
    assert torch.isfinite(fast.get("action_log_prob", torch.zeros(1))).all()


def test_asymmetric_bounds_are_mapped_like_the_actor() -> None:
    env, actor = _actor("Pendulum-v1")
    actor.module[1].distribution_kwargs.update(low=torch.tensor([-0.5]), high=torch.tensor([3.0]))
    expected, fast = _both(actor, TanhNormalSampler(actor), _observations(env, 32), ExplorationType.RANDOM)
    assert torch.equal(fast["action"], expected["action"])
    assert torch.equal(fast["action_log_prob"], expected["action_log_prob"])
    assert (fast["action"] > -0.5).all() and (fast["action"] < 3.0).all()


def test_deterministic_exploration_is_the_actor_itself() -> None:
    env, actor = _actor("Pendulum-v1")
    expected, fast = _both(actor, TanhNormalSampler(actor), _observations(env, 8), ExplorationType.DETERMINISTIC)
    assert torch.equal(fast["action"], expected["action"])


@pytest.mark.parametrize("return_log_prob", [True, False])
@pytest.mark.parametrize("policy_scale", ["state", "parameter", "gsde"])
@pytest.mark.parametrize("bounds", [None, (-0.5, 3.0)], ids=["env_bounds", "asymmetric_bounds"])
def test_the_deterministic_policy_writes_the_actors_deterministic_actions_bit_for_bit(
    return_log_prob: bool, policy_scale: str, bounds: tuple[float, float] | None
) -> None:
    """What evaluation runs: the Gaussian mean through the safe tanh and the bounds' map, saturated means included."""
    env, actor = _actor("Pendulum-v1", return_log_prob=return_log_prob, policy_scale=policy_scale)
    if bounds is not None:
        actor.module[1].distribution_kwargs.update(low=torch.tensor([bounds[0]]), high=torch.tensor([bounds[1]]))
    with torch.no_grad():  # means far past the tanh's float32 saturation for some rows: the safe clamp decides
        [layer for layer in actor.modules() if isinstance(layer, torch.nn.Linear)][-1].weight.mul_(50.0)
    expected, fast = _both(actor, DeterministicTanhNormalPolicy(actor), _observations(env, 64),
                           ExplorationType.DETERMINISTIC)  # fmt: skip
    assert (fast["loc"].abs() > 10).any()
    for key in ("loc", "scale", "action"):
        assert torch.equal(fast[key], expected[key]), key
    assert "action_log_prob" not in fast.keys()  # evaluation reads no score


def test_evaluation_policy_keeps_modules_it_does_not_reproduce() -> None:
    _, actor = _actor("Pendulum-v1")
    assert isinstance(evaluation_policy(actor), DeterministicTanhNormalPolicy)
    assert evaluation_policy(actor.module[0]) is actor.module[0]


def test_collection_policy_keeps_modules_it_does_not_reproduce() -> None:
    _, actor = _actor("Pendulum-v1")
    assert isinstance(collection_policy(actor), TanhNormalSampler)
    assert collection_policy(actor.module[0]) is actor.module[0]
    with pytest.raises(TypeError, match="ProbabilisticActor"):
        TanhNormalSampler(actor.module[0])


@pytest.mark.parametrize("low, high", [(-1.0, 1.0), (-0.5, 3.0)], ids=["unit_bounds", "asymmetric_bounds"])
def test_the_log_prob_of_given_actions_and_its_gradients_equal_tanh_normals(low: float, high: float) -> None:
    """What PPO's lean loss scores its minibatch with: the actions are data, the gradient reaches loc and scale."""
    generator = torch.Generator().manual_seed(3)
    loc = (torch.randn(64, 2, generator=generator) * 3).requires_grad_(True)
    scale = (torch.rand(64, 2, generator=generator) + 0.05).requires_grad_(True)
    kwargs = {"low": torch.full((2,), low), "high": torch.full((2,), high)}
    with torch.no_grad():  # actions from the distribution, a few at the bounds (the safe clamp decides there)
        action = TanhNormal(loc, scale, **kwargs).sample()
        action[:4] = torch.tensor([low, high])
    expected = TanhNormal(loc, scale, **kwargs).log_prob(action)
    fast = log_prob(loc, scale, action, squashing_bounds(kwargs))
    assert torch.equal(fast, expected)
    fast_gradients = torch.autograd.grad(fast.sum(), (loc, scale))
    expected_gradients = torch.autograd.grad(expected.sum(), (loc, scale))
    assert all(torch.equal(a, b) for a, b in zip(fast_gradients, expected_gradients, strict=True))


@pytest.mark.parametrize("low, high", [(-1.0, 1.0), (-0.5, 3.0)], ids=["unit_bounds", "asymmetric_bounds"])
def test_a_reparameterised_draw_and_its_gradients_equal_tanh_normals(low: float, high: float) -> None:
    """What SAC's lean loss draws the actor's action with: the same values and, through autograd, the same
    gradients for loc and scale (the order of the operations decides the order autograd sums the paths in)."""
    generator = torch.Generator().manual_seed(4)
    loc = (torch.randn(64, 2, generator=generator) * 3).requires_grad_(True)
    scale = (torch.rand(64, 2, generator=generator) + 0.05).requires_grad_(True)
    kwargs = {"low": torch.full((2,), low), "high": torch.full((2,), high)}
    torch.manual_seed(5)
    expected = TanhNormal(loc, scale, **kwargs).rsample_and_log_prob()
    torch.manual_seed(5)
    fast = rsample_and_log_prob(loc, scale, squashing_bounds(kwargs))
    assert all(torch.equal(a, b) for a, b in zip(fast, expected, strict=True))
    weights = torch.randn(64, 2, generator=generator)  # a loss that reads the action and its log-probability
    gradients = [torch.autograd.grad((w * a).sum() + lp.sum(), (loc, scale)) for a, lp, w in
                 [(*fast, weights), (*expected, weights)]]  # fmt: skip
    assert all(torch.equal(a, b) for a, b in zip(*gradients, strict=True))


def test_held_noise_keeps_each_envs_draw_for_its_steps_and_scores_it_with_the_actors_density() -> None:
    env, actor = _actor("Pendulum-v1")
    sampler = TanhNormalSampler(actor, noise_hold_steps=3)
    observations = _observations(env, 4)
    torch.manual_seed(7)
    draws, outputs = [], []
    with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
        for _ in range(4):
            out = sampler(observations.clone())
            pre_image = (out["action"] / 2).clamp(-1 + 1e-6, 1 - 1e-6).atanh()  # Pendulum's bounds are [-2, 2]
            draws.append((pre_image - out["loc"]) / out["scale"])
            outputs.append(out)
    unsaturated = outputs[0]["action"].abs() < 1.9  # where the tanh can be inverted to the draw
    assert unsaturated.any()
    assert torch.allclose(draws[0][unsaturated], draws[1][unsaturated], atol=1e-4)
    assert torch.allclose(draws[0][unsaturated], draws[2][unsaturated], atol=1e-4)
    assert not torch.allclose(draws[0][unsaturated], draws[3][unsaturated], atol=1e-2)  # the 4th call draws again
    out = outputs[1]
    density = TanhNormal(out["loc"], out["scale"], low=-2.0, high=2.0).log_prob(out["action"])
    assert torch.allclose(out["action_log_prob"], density, atol=1e-4)  # the log-probability of the action taken


def test_noise_held_for_fewer_than_one_step_or_by_a_policy_that_cannot_is_refused() -> None:
    from iquitos_lightning.agents import PPO, RolloutConfig
    from iquitos_lightning.errors import ConfigError

    with pytest.raises(ConfigError, match="noise_hold_steps must be a positive integer, got 0"):
        PPO(env=EnvConfig(name="Pendulum-v1"), rollout=RolloutConfig(frames_per_batch=64, eval_every_frames=64,
                                                                      noise_hold_steps=0))  # fmt: skip
    with pytest.raises(ConfigError, match="needs a TanhNormal policy"):
        collection_policy(torch.nn.Identity(), noise_hold_steps=4)
