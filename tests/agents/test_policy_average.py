"""``policy_average`` (SAC; PPO and A2C once per rollout): evaluations act with a moving average of the actor's
weights (agents/policy_average.py), the plain mean of the first ``1 / rate`` updates, then an exponential average;
checkpoints carry it."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from agents_testkit import cpu_trainer, small_sac
from torch import nn

from iquitos_lightning.agents import A2C, PPO, EnvConfig, RolloutConfig
from iquitos_lightning.agents.policy_average import averaged_policy
from iquitos_lightning.envs.env_config import Episodes
from iquitos_lightning.errors import ConfigError


def _averaged_weights(rate: float, values: list[float]) -> float:
    layer = nn.Linear(1, 1, bias=False)
    average = averaged_policy(layer, rate)
    for value in values:
        with torch.no_grad():
            layer.weight.fill_(value)
        average.update_parameters(layer)
    return float(average.module.weight)


def test_the_average_is_the_plain_mean_first_then_exponential():
    assert _averaged_weights(0.25, [4.0, 8.0, 0.0, 4.0]) == pytest.approx(4.0)  # four updates: their mean
    # a fifth moves it a quarter of the way (the mean would move a fifth): 4 + (24 - 4) / 4
    assert _averaged_weights(0.25, [4.0, 8.0, 0.0, 4.0, 24.0]) == pytest.approx(9.0)
    assert _averaged_weights(1.0, [4.0, 8.0, 0.0]) == pytest.approx(0.0)  # rate 1: the actor itself


def test_evaluations_act_with_the_average_and_checkpoints_carry_it(tmp_path):
    pl.seed_everything(4)
    agent = small_sac(200, policy_average=0.01)
    cpu_trainer(tmp_path, callbacks=[], limit_val_batches=0).fit(agent)
    average = agent.averaged_actor
    actor_updates = agent.updates_done  # the actor stepped at every update (no actor delay)
    assert actor_updates > 0 and int(average.n_averaged) == actor_updates
    moved = [
        (averaged - current).abs().max()
        for averaged, current in zip(average.module.parameters(), agent.actor.parameters(), strict=True)
    ]
    assert max(moved) > 1e-4  # the average lags the actor it follows
    assert not any(parameter.requires_grad for parameter in average.parameters())

    # The evaluation acts with the average: with its output layer zeroed, its mode is Pendulum's action 0.
    output_layer = [module for module in average.module.modules() if isinstance(module, nn.Linear)][-1]
    with torch.no_grad():
        output_layer.weight.zero_()
        output_layer.bias.zero_()
    _, rollout = agent.evaluate_episode(0)
    assert rollout["action"].abs().max() == 0
    agent.averaged_actor = None  # without an average, the actor itself is evaluated
    _, rollout = agent.evaluate_episode(0)
    assert rollout["action"].abs().max() > 0.1
    agent.averaged_actor = average

    restored = small_sac(200, policy_average=0.01)
    restored.load_state_dict(agent.state_dict())
    for saved, loaded in zip(average.state_dict().values(), restored.averaged_actor.state_dict().values(), strict=True):
        assert torch.equal(saved, loaded)


def test_without_an_average_the_actor_is_evaluated_and_a_bad_rate_is_refused():
    agent = small_sac(100)
    assert agent.averaged_actor is None and agent.evaluated_policy is agent.actor
    with pytest.raises(ConfigError, match="policy_average"):
        small_sac(100, policy_average=1.5)


def _small_on_policy(agent_class: type, **options) -> object:
    """PPO or A2C on Pendulum: two rollouts of 256 frames, no evaluation during the fit."""
    return agent_class(
        env=EnvConfig(name="Pendulum-v1", episodes=Episodes(seed=1, max_steps=200)),
        rollout=RolloutConfig(frame_budget=512, frames_per_batch=256, eval_every_frames=512, eval_episodes=0),
        hidden_sizes=(8, 8),
        **options,
    )


@pytest.mark.parametrize("agent_class", [PPO, A2C])
def test_on_policy_evaluations_act_with_the_average_of_each_rollouts_actor(tmp_path, agent_class):
    """The on-policy agents average once per rollout: after two, the average is the mean of the two actors."""
    pl.seed_everything(3)
    actors_after_rollouts: list[list[torch.Tensor]] = []

    class KeepActor(pl.Callback):
        def on_train_batch_end(self, trainer, module, *args) -> None:  # after the rollout's updates
            actors_after_rollouts.append([parameter.detach().clone() for parameter in module.actor.parameters()])

    agent = _small_on_policy(agent_class, policy_average=0.25)
    cpu_trainer(tmp_path, callbacks=[KeepActor()], limit_val_batches=0).fit(agent)
    assert len(actors_after_rollouts) == 2 and int(agent.averaged_actor.n_averaged) == 2
    for averaged, first, second in zip(agent.averaged_actor.module.parameters(), *actors_after_rollouts, strict=True):
        torch.testing.assert_close(averaged, (first + second) / 2)
    assert not torch.equal(actors_after_rollouts[0][0], actors_after_rollouts[1][0])  # the actor moved
    assert agent.evaluated_policy is agent.averaged_actor.module
    assert not any(parameter.requires_grad for parameter in agent.averaged_actor.parameters())

    restored = _small_on_policy(agent_class, policy_average=0.25)
    restored.load_state_dict(agent.state_dict())
    saved, loaded = agent.averaged_actor.state_dict(), restored.averaged_actor.state_dict()
    assert saved.keys() == loaded.keys() and all(torch.equal(saved[key], loaded[key]) for key in saved)
    assert _small_on_policy(agent_class).averaged_actor is None  # the default: the actor itself is evaluated
    with pytest.raises(ConfigError, match="policy_average"):
        _small_on_policy(agent_class, policy_average=-0.1)
