"""PPO's and A2C's networks start as CleanRL's: orthogonal layers, zero biases, a policy mean near 0 and one learned
log-std per action (or, with ``policy_scale: state``, SAC's state-dependent scale); SAC's actor is unchanged."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import pytest
import torch
from agents_testkit import cpu_trainer
from torch import nn
from torchrl.envs import ExplorationType, set_exploration_type

from iquitos_lightning.agents import A2C, PPO, SAC, EnvConfig, RolloutConfig
from iquitos_lightning.agents.health import action_bounds, approximate_kl, policy_spread
from iquitos_lightning.agents.networks import linear_layers
from iquitos_lightning.agents.speed import SpeedConfig
from iquitos_lightning.envs.env_config import Episodes
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.fastpath.tanh_normal import state_dependent_noise_head

SITE = EnvConfig(name="iquitos", site="configs/site/tiny.yaml", episodes=Episodes(seed=0))
ROLLOUT = RolloutConfig(frames_per_batch=64, eval_every_frames=64)


def assert_orthogonal(layer: nn.Linear, gain: float) -> None:
    """Orthogonal rows or columns (whichever are fewer) of norm ``gain``; zero bias."""
    weight = layer.weight.detach().double()
    small = weight @ weight.T if weight.shape[0] <= weight.shape[1] else weight.T @ weight
    torch.testing.assert_close(small, gain**2 * torch.eye(small.shape[0], dtype=torch.float64), rtol=0, atol=1e-5)
    assert not layer.bias.any()


@pytest.mark.parametrize("agent_class", [PPO, A2C])
def test_actor_and_critic_are_orthogonal_with_cleanrls_gains_and_a_learned_log_std(agent_class):
    torch.manual_seed(0)
    agent = agent_class(env=SITE, rollout=ROLLOUT, hidden_sizes=(32, 16))
    actions = agent.train_env.action_spec.shape[-1]
    actor_layers, critic_layers = linear_layers(agent.actor), linear_layers(agent.critic)
    assert [layer.out_features for layer in actor_layers] == [32, 16, actions]  # the mean only
    for layer in actor_layers[:-1] + critic_layers[:-1]:
        assert_orthogonal(layer, math.sqrt(2))
    assert_orthogonal(actor_layers[-1], 0.01)
    assert_orthogonal(critic_layers[-1], 1.0)

    log_std = [parameter for name, parameter in agent.actor.named_parameters() if "state_independent_scale" in name]
    assert len(log_std) == 1 and log_std[0].shape == (actions,) and not log_std[0].any()
    example = agent.train_env.fake_tensordict()
    different = example.clone()
    example["observation"] = torch.zeros_like(example["observation"])
    different["observation"] = torch.randn_like(different["observation"]) * 10
    first, second = agent.actor(example), agent.actor(different)
    torch.testing.assert_close(first["scale"], torch.ones(actions))  # exp(0): the whole action range
    torch.testing.assert_close(second["scale"], first["scale"], rtol=0, atol=0)  # not the observation's
    assert first["loc"].abs().max() == 0  # zero observation, zero biases
    assert second["loc"].abs().max() < 0.5  # gain 0.01: near 0 for any observation
    assert log_std[0] in set(agent.loss_module.parameters())  # learned with the rest


def test_a_state_dependent_scale_is_an_option_and_a_bad_value_is_refused_naming_the_key():
    agent = PPO(env=SITE, rollout=ROLLOUT, hidden_sizes=(16,), policy_scale="state")
    actions = agent.train_env.action_spec.shape[-1]
    assert linear_layers(agent.actor)[-1].out_features == 2 * actions
    assert not any("state_independent_scale" in name for name, _ in agent.actor.named_parameters())
    example = agent.train_env.fake_tensordict()
    torch.testing.assert_close(agent.actor(example)["scale"], torch.ones(actions), rtol=0, atol=1e-3)
    with pytest.raises(
        ConfigError,
        match=r"^model.policy_scale must be one of \('state', 'parameter', 'fixed', 'gsde', 'gsde_fixed'\), "
        r"got 'global'",
    ):
        PPO(env=SITE, rollout=ROLLOUT, policy_scale="global")


def test_sacs_actor_keeps_its_state_dependent_scale_and_default_init():
    torch.manual_seed(0)
    agent = SAC(env=EnvConfig(name="Pendulum-v1"), hidden_sizes=(32, 32))
    layers = linear_layers(agent.actor)
    assert layers[-1].out_features == 2  # loc and scale of Pendulum's one action
    assert all(layer.bias.any() for layer in layers)  # PyTorch's default init, not zeroed
    assert not any("state_independent_scale" in name for name, _ in agent.actor.named_parameters())


def test_a_plain_gaussian_stores_its_samples_beyond_the_bounds_with_exact_log_probabilities_and_the_env_clips():
    """``distribution: normal`` (CleanRL's and SB3's PPO/A2C): the stored action is the Gaussian's sample, its
    log-probability the Gaussian's own, out-of-range samples included, and the deterministic action the mean."""
    torch.manual_seed(0)
    agent = A2C(env=SITE, rollout=ROLLOUT, hidden_sizes=(16,), distribution="normal", initialisation="default")
    with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):  # as the collector samples
        step = agent.actor(agent.train_env.reset())
    action, loc, scale = step["action"], step["loc"], step["scale"]
    assert (action.abs() > 1).any()  # a scale of 1 around a mean near 0: some samples beyond [-1, 1]
    normal = torch.distributions.Normal(loc, scale)
    torch.testing.assert_close(step["action_log_prob"], normal.log_prob(action).sum(-1))
    assert approximate_kl(agent.actor, step) == pytest.approx(0.0, abs=1e-6)  # every sample kept, none off
    assert policy_spread(loc, scale, action, *action_bounds(agent.actor))["actions_at_bounds"] > 0
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        torch.testing.assert_close(agent.actor(agent.train_env.reset())["action"], loc)
    stepped = agent.train_env.step(step.clone())  # the env clips: the step goes through
    assert torch.isfinite(stepped["next", "reward"]).all()


def test_a_tanh_gaussians_kl_leaves_out_actions_its_atanh_cannot_invert():
    torch.manual_seed(0)
    agent = A2C(env=SITE, rollout=ROLLOUT, hidden_sizes=(16,))
    with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
        step = agent.actor(agent.train_env.reset())
    step["action"][..., 0] = 1.0  # a tanh rounded onto the bound: its recomputed log-probability is off
    assert math.isnan(approximate_kl(agent.actor, step))  # nothing left to measure


def test_an_unknown_distribution_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match="model.distribution"):
        A2C(env=SITE, rollout=ROLLOUT, distribution="beta")


@pytest.mark.parametrize("policy_scale", ["parameter", "state"])
def test_the_initial_scale_is_the_fresh_policys_scale_in_either_layout(policy_scale):
    agent = A2C(env=SITE, rollout=ROLLOUT, hidden_sizes=(16,), policy_scale=policy_scale, initial_scale=0.135)
    actions = agent.train_env.action_spec.shape[-1]
    example = agent.train_env.fake_tensordict()
    example["observation"] = torch.zeros_like(example["observation"])
    torch.testing.assert_close(agent.actor(example)["scale"], torch.full((actions,), 0.135), rtol=0, atol=1e-3)


class LearningRates(pl.Callback):
    """The optimizer's learning rate after each rollout's updates."""

    def __init__(self) -> None:
        self.rates: list[float] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.rates.append(trainer.optimizers[0].param_groups[0]["lr"])


@pytest.mark.parametrize("lr_anneal", [False, True])
def test_an_annealed_learning_rate_falls_linearly_with_the_frames_done(lr_anneal):
    rollout = RolloutConfig(frame_budget=256, frames_per_batch=64, eval_every_frames=256, eval_episodes=0)
    agent = A2C(env=EnvConfig(name="Pendulum-v1"), rollout=rollout, hidden_sizes=(16,), lr=1e-3, lr_anneal=lr_anneal)
    rates = LearningRates()
    cpu_trainer(callbacks=[rates]).fit(agent)
    expected = [1e-3 * (1 - frames / 256) for frames in (0, 64, 128, 192)] if lr_anneal else [1e-3] * 4
    assert rates.rates == pytest.approx(expected)


def test_an_annealed_learning_rate_is_refused_with_cuda_graphs():
    with pytest.raises(ConfigError, match="model.lr_anneal"):
        A2C(env=SITE, rollout=ROLLOUT, lr_anneal=True, speed=SpeedConfig(cuda_graphs=True))


def test_a_fixed_scale_stays_at_its_initial_value_while_the_mean_learns_and_travels_in_the_checkpoint():
    """``policy_scale: fixed``: the log-std is a buffer (in the state dict, not among the optimised parameters),
    so a fit moves the policy's mean and leaves its scale at ``initial_scale``."""
    torch.manual_seed(0)
    rollout = RolloutConfig(frame_budget=256, frames_per_batch=64, eval_every_frames=256, eval_episodes=0)
    agent = A2C(
        env=EnvConfig(name="Pendulum-v1"),
        rollout=rollout,
        hidden_sizes=(16,),
        lr=1e-2,
        policy_scale="fixed",
        initial_scale=0.5,
    )
    assert not any("state_independent_scale" in name for name, _ in agent.loss_module.named_parameters())
    assert any("state_independent_scale" in key for key in agent.state_dict())
    output = linear_layers(agent.actor)[-1]
    before = output.weight.detach().clone()
    cpu_trainer().fit(agent)
    assert not torch.equal(output.weight, before)  # the mean learned
    example = agent.train_env.fake_tensordict()
    torch.testing.assert_close(agent.actor(example)["scale"], torch.full((1,), 0.5))  # the scale did not


@pytest.mark.parametrize("policy_scale", ["gsde", "gsde_fixed"])
@pytest.mark.parametrize("agent_class", [A2C, PPO])
def test_gsde_trains_the_mean_and_the_noise_weights_unless_they_are_fixed(agent_class, policy_scale: str) -> None:
    torch.manual_seed(0)
    rollout = RolloutConfig(frame_budget=256, frames_per_batch=64, eval_every_frames=256, eval_episodes=0,
                            noise_hold_steps=8)  # fmt: skip
    agent = agent_class(
        env=EnvConfig(name="Pendulum-v1"), rollout=rollout, hidden_sizes=(16,), lr=1e-2, policy_scale=policy_scale
    )
    head = state_dependent_noise_head(agent.actor)
    sigma, mean = head.log_sigma.detach().clone(), head.mean.weight.detach().clone()
    cpu_trainer().fit(agent)
    assert agent.frames_done == 256
    assert not torch.equal(head.mean.weight, mean)
    learned = policy_scale == "gsde"
    assert torch.equal(head.log_sigma, sigma) is not learned  # moved by the policy gradient, or kept
    assert any(key.endswith("log_sigma") for key in agent.state_dict())  # in the checkpoint either way
    assert torch.isfinite(head.log_sigma).all()
