"""gSDE (``policy_scale: gsde``): the collection sampler's noise is a held matrix per env, its deviation a function of
the state's features, distributed as the policy's own TanhNormal, so log-probabilities and losses stay exact."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import TanhNormal

from iquitos_lightning.agents import EnvConfig
from iquitos_lightning.agents.networks import GSDE_FEATURES_KEY, initialise_lazy, make_actor
from iquitos_lightning.envs.factory import make_env
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.fastpath.tanh_normal import TanhNormalSampler, collection_policy, state_dependent_noise_head


def _gsde_actor(initial_scale: float = 0.5):
    env = make_env(EnvConfig(name="Pendulum-v1"))
    actor = make_actor(env, (16, 8), "tanh", policy_scale="gsde", initial_scale=initial_scale)
    initialise_lazy(env, actor)
    return env, actor


def _sample(sampler, observation: torch.Tensor) -> TensorDict:
    with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
        return sampler(TensorDict({"observation": observation}, batch_size=observation.shape[:1]))


def _deviation(out: TensorDict) -> torch.Tensor:
    """The pre-tanh deviation from the mean (Pendulum's bounds are [-2, 2])."""
    return (out["action"] / 2).atanh() - out["loc"]


def test_the_held_matrix_gives_each_state_its_own_deviation_and_is_drawn_again_when_due() -> None:
    torch.manual_seed(0)
    env, actor = _gsde_actor()
    head = state_dependent_noise_head(actor)
    assert head is not None and isinstance(collection_policy(actor, 3), TanhNormalSampler)
    sampler = TanhNormalSampler(actor, noise_hold_steps=3)
    first, second = torch.randn(2, 3), torch.randn(2, 3)  # two envs, two different states per call
    outputs = [_sample(sampler, first)]
    draw = sampler._held_noise.clone()  # the matrices of the first three calls
    outputs += [_sample(sampler, observation) for observation in (second, first, first)]
    assert draw.shape == (2, 8, 1)  # one [features, actions] matrix per env
    for out in outputs[:3]:  # features @ (sigma * W), each call's own features with the held W
        expected = (out[GSDE_FEATURES_KEY].unsqueeze(-2) @ (head.log_sigma.exp() * draw)).squeeze(-2)
        torch.testing.assert_close(_deviation(out), expected, rtol=1e-3, atol=1e-4)
    assert not torch.allclose(_deviation(outputs[0]), _deviation(outputs[1]), atol=1e-3)  # another state, another one
    torch.testing.assert_close(_deviation(outputs[0]), _deviation(outputs[2]))  # same state, same held matrix
    assert not torch.allclose(_deviation(outputs[0]), _deviation(outputs[3]), atol=1e-3)  # the 4th call drew again


def test_given_the_state_the_deviation_is_normal_with_the_heads_scale_and_scored_by_tanh_normal() -> None:
    torch.manual_seed(0)
    env, actor = _gsde_actor(initial_scale=0.3)
    sampler = TanhNormalSampler(actor, noise_hold_steps=1)  # a fresh matrix per call
    observation = torch.randn(1, 3).expand(20_000, 3).contiguous()  # one state, 20,000 envs: 20,000 draws
    out = _sample(sampler, observation)
    deviation = _deviation(out)
    scale = out["scale"][0]
    assert 0.05 < float(scale) < 1.0
    torch.testing.assert_close(deviation.std(0), scale, rtol=0.03, atol=0)  # the scale the policy reports
    assert abs(float(deviation.mean())) < 4 * float(scale) / 20_000**0.5
    density = TanhNormal(out["loc"], out["scale"], low=-2.0, high=2.0).log_prob(out["action"])
    torch.testing.assert_close(out["action_log_prob"], density, rtol=0, atol=1e-4)


def test_gsde_is_refused_without_hidden_layers_or_with_a_plain_gaussian() -> None:
    env = make_env(EnvConfig(name="Pendulum-v1"))
    with pytest.raises(ConfigError, match="over the last hidden layer"):
        make_actor(env, (), "tanh", policy_scale="gsde")
    with pytest.raises(ConfigError, match="needs model.distribution 'tanh_normal'"):
        make_actor(env, (16,), "tanh", policy_scale="gsde", distribution="normal")
