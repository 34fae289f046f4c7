"""PPO's ``target_kl``: a rollout's epochs stop once the policy has moved that far from the one that collected it.

Whole fits on Pendulum (two rollouts of 256 frames, 64-row minibatches): a limit never reached trains the same
weights as no limit (the check draws no random numbers), a limit any update passes trains the weights of one epoch,
and the epochs run are a health signal."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from agents_testkit import cpu_trainer

from iquitos_lightning.agents import PPO, EnvConfig, RolloutConfig
from iquitos_lightning.envs.env_config import Episodes
from iquitos_lightning.errors import ConfigError


class EpochsLogged(pl.Callback):
    """The ``health/epochs`` of each rollout (``training_step``'s outputs, which the agent logs after the callbacks)."""

    def __init__(self) -> None:
        self.epochs: list[float] = []

    def on_train_batch_end(self, trainer, module, outputs, *args) -> None:
        if "health/epochs" in outputs:
            self.epochs.append(float(outputs["health/epochs"]))


def fitted_ppo(tmp_path, name: str, epochs: int, target_kl: float) -> tuple[PPO, list[float]]:
    pl.seed_everything(5)
    agent = PPO(
        env=EnvConfig(name="Pendulum-v1", episodes=Episodes(seed=1, max_steps=200)),
        rollout=RolloutConfig(frame_budget=512, frames_per_batch=256, eval_every_frames=512, eval_episodes=0),
        hidden_sizes=(8, 8),
        minibatch_size=64,
        epochs=epochs,
        target_kl=target_kl,
    )
    logged = EpochsLogged()
    cpu_trainer(tmp_path / name, callbacks=[logged], limit_val_batches=0).fit(agent)
    return agent, logged.epochs


def same_actor(first: PPO, second: PPO) -> bool:
    pairs = zip(first.actor.parameters(), second.actor.parameters(), strict=True)
    return all(torch.equal(a, b) for a, b in pairs)


def test_the_epochs_stop_at_the_kl_limit_and_a_limit_never_reached_changes_nothing(tmp_path):
    unlimited, no_signal = fitted_ppo(tmp_path, "unlimited", epochs=3, target_kl=0.0)
    never_reached, all_epochs = fitted_ppo(tmp_path, "never", epochs=3, target_kl=1e6)
    at_once, first_only = fitted_ppo(tmp_path, "at_once", epochs=3, target_kl=1e-12)
    one_epoch, _ = fitted_ppo(tmp_path, "one", epochs=1, target_kl=0.0)

    assert unlimited.updates_done == never_reached.updates_done == 2 * 3 * 4  # rollouts x epochs x minibatches
    assert same_actor(unlimited, never_reached)
    assert no_signal == [] and all_epochs == [3.0, 3.0]
    assert at_once.updates_done == one_epoch.updates_done == 2 * 1 * 4
    assert same_actor(at_once, one_epoch) and not same_actor(at_once, unlimited)
    assert first_only == [1.0, 1.0]


def test_a_negative_kl_limit_is_refused():
    with pytest.raises(ConfigError, match="target_kl"):
        PPO(env=EnvConfig(name="Pendulum-v1"), target_kl=-0.01)
