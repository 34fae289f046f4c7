"""Non-finite losses skip the update and are counted; a persistent fault stops the run naming the loss term,
with a checkpoint holding the weights from before the fault; the env's values are checked at the boundary."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
from agents_testkit import cpu_trainer, frame_checkpoint, small_sac  # noqa: E402
from robust_testkit import load, pendulum_sac_args  # noqa: E402

from iquitos_lightning.agents import A2C, EnvConfig, RolloutConfig  # noqa: E402
from iquitos_lightning.agents.guards import NonFiniteTraining  # noqa: E402
from iquitos_lightning.cli import run_lightning_cli  # noqa: E402
from iquitos_lightning.envs.env_config import Backend, Episodes
from iquitos_lightning.envs.finite import FiniteValues, NonFiniteEnvValue  # noqa: E402
from iquitos_lightning.training.checkpoint_io import SafeCheckpointIO  # noqa: E402


class PoisonRewards(pl.Callback):
    """Makes the rewards of the rollouts in ``[start, stop)`` frames NaN before the agent learns from them.

    Stands in for a broken reward term downstream of the env check; records the weights just before the
    first poisoned rollout.
    """

    def __init__(self, start: int, stop: int = sys.maxsize) -> None:
        self.start, self.stop = start, stop
        self.weights_before: dict[str, torch.Tensor] | None = None

    def on_train_batch_start(self, trainer: pl.Trainer, agent, batch, batch_idx: int) -> None:  # noqa: ANN001
        frames_after = agent.frames_done + batch.numel()
        if self.start < frames_after <= self.stop:
            if self.weights_before is None:
                self.weights_before = {key: value.clone() for key, value in agent.state_dict().items()}
            batch["next", "reward"].fill_(float("nan"))


def test_persistent_nan_loss_stops_after_the_limit_naming_the_term_with_the_weights_from_before(tmp_path):
    pl.seed_everything(0)
    agent = small_sac(
        2_000,
        rollout=RolloutConfig(
            frame_budget=2_000, frames_per_batch=50, eval_every_frames=1_000, eval_episodes=0, max_nonfinite_in_a_row=3
        ),
    )
    poison = PoisonRewards(start=100)
    trainer = cpu_trainer(tmp_path, callbacks=[frame_checkpoint(tmp_path, 50), poison], plugins=[SafeCheckpointIO()])

    with pytest.raises(NonFiniteTraining, match="3 updates in a row had a non-finite loss_qvalue") as stopped:
        trainer.fit(agent)

    assert agent.nonfinite.skipped_total == 3
    assert any("checkpoint saved" in note for note in stopped.value.__notes__)
    saved = load(tmp_path / "checkpoints" / "last.ckpt")
    assert saved["rl_state"]["frames_done"] == 150  # the rollout that faulted is counted, none of its updates applied
    for key, before in poison.weights_before.items():
        assert torch.equal(saved["state_dict"][key], before), key
        assert torch.isfinite(saved["state_dict"][key]).all(), key


def test_one_bad_rollout_is_skipped_counted_and_logged_and_training_goes_on(tmp_path):
    pl.seed_everything(0)
    agent = A2C(
        env=EnvConfig(name="Pendulum-v1", episodes=Episodes(seed=2, max_steps=64)),
        rollout=RolloutConfig(frame_budget=320, frames_per_batch=64, eval_every_frames=320, eval_episodes=0),
    )
    trainer = cpu_trainer(callbacks=[PoisonRewards(start=128, stop=192)], logger=CSVLogger(tmp_path))
    trainer.fit(agent)

    assert agent.frames_done == 320
    assert agent.nonfinite.skipped_total == 1 and agent.updates_done == 4
    assert trainer.logged_metrics["train/nonfinite_skipped"] == 1
    assert all(torch.isfinite(parameter).all() for parameter in agent.parameters())


class BrokenSensor(gym.Env):
    """A 3-value env whose second observation ('pv') turns NaN at step 3, or whose reward does."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    observation_names = ("hour", "pv", "load")

    def __init__(self, broken: str) -> None:
        self.broken = broken
        self.t = 0

    def reset(self, *, seed=None, options=None):  # noqa: ANN001 - Gymnasium's signature
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action):  # noqa: ANN001
        self.t += 1
        observation = np.ones(3, np.float32)
        reward = 0.0
        if self.t == 3:
            if self.broken == "observation":
                observation[1] = np.nan
            else:
                reward = float("inf")
        return observation, reward, False, False, {}


@pytest.mark.parametrize(
    ("broken", "named"),
    [
        ("observation", r"observation 'pv' \(observation\[1\]\) = nan at step 3"),
        ("reward", r"reward \(inf\) at step 3"),
    ],
)
def test_non_finite_env_values_are_stopped_at_the_boundary_naming_the_key(broken, named):
    env = FiniteValues(BrokenSensor(broken), "broken-sensor")
    env.reset()
    env.step(np.zeros(1))
    env.step(np.zeros(1))
    with pytest.raises(NonFiniteEnvValue, match=named):
        env.step(np.zeros(1))


def test_every_training_env_is_checked_at_the_boundary():
    from iquitos_lightning.envs.factory import episode_seeding, make_env

    env = make_env(EnvConfig(name="Pendulum-v1"))
    assert isinstance(episode_seeding(env).env, FiniteValues)


TINY = str(Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml")


@pytest.fixture(scope="module")
def twin_data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.mark.parametrize(("broken", "named"), [("observation", r"observation 'pv' "), ("reward", r"reward ")])
def test_a_non_finite_value_of_the_training_twin_stops_the_rollout_naming_it(twin_data_root, broken, named):
    """The twin backend has no Gymnasium layer for :class:`FiniteValues`: its own check must catch a gap in the
    site's data (here hour 2's price, feeding the reward, or hour 3's PV observation) before it reaches the buffer."""
    from iquitos_lightning.envs.factory import make_env
    from iquitos_lightning.envs.site_tables import observation_names

    env = make_env(EnvConfig(site=TINY, backend=Backend(train="twin", num_envs=2, data_root=str(twin_data_root))))
    twin = env
    assert env.rollout(5).numel() == 10  # clean data: five steps of two envs go through
    if broken == "observation":
        pv = observation_names(twin.sockets, twin.objective).index("pv")
        twin.stacked.observation[3, pv] = float("nan")  # what env.step returns after its 3rd hour
        named += rf"\(observation\[{pv}\]\) = nan in env 0 of the batch at step 3 \(step\)"
    else:
        twin.stacked.hourly[2, 2] = float("nan")  # the price of hour 2: the cost term of the 3rd step's reward
        named += r"= nan in env 0 of the batch at step 3 \(step\)"
    with pytest.raises(NonFiniteEnvValue, match=named):
        env.rollout(5)


def test_a_finite_loss_with_a_non_finite_gradient_is_named_by_the_term_its_optimizer_learns():
    from iquitos_lightning.agents.guards import find_nonfinite

    finite = {"loss_actor": torch.tensor(1.0), "loss_qvalue": torch.tensor(2.0)}
    gradients = {"loss_actor": [torch.ones(3)], "loss_qvalue": [torch.ones(2), torch.tensor([0.0, float("inf")])]}
    assert find_nonfinite(finite, gradients) == "gradient of loss_qvalue"
    assert find_nonfinite(finite, {"loss_actor": [torch.ones(3)]}) is None
    assert find_nonfinite({**finite, "loss_actor": torch.tensor(float("nan"))}, gradients) == "loss_actor"


def test_a_persistent_non_finite_loss_through_the_cli_exits_4_with_one_line(tmp_path, capsys):
    """A learning rate of 1e30 throws the weights to ~1e30 in one step, so every later loss is non-finite: the CLI
    stops with status 4 and its one line, no traceback."""
    arguments = pendulum_sac_args(tmp_path, frame_budget=300)
    code = run_lightning_cli([*arguments, "--model.critic_lr=1e30", "--model.rollout.max_nonfinite_in_a_row=2"])
    said = capsys.readouterr().err
    assert code == 4, said
    assert "Traceback" not in said
    assert "training stopped: 2 updates in a row had a non-finite" in said


def test_the_gradient_check_without_a_norm_finds_every_non_finite_value_and_leaves_the_gradients_bit_for_bit():
    """The GradScaler's kernel at a scale of 1 (guards.gradients_are_finite) multiplies each gradient by 1 in place:
    denormals, signed zeros and the largest floats keep their bits, and a NaN or inf anywhere is found."""
    from iquitos_lightning.agents.guards import find_nonfinite, gradients_are_finite

    awkward = [torch.tensor([1e-40, -0.0, 3.4e38, -3.4e38]), torch.randn(64, 70), torch.randn(3).double()]
    before = [gradient.clone() for gradient in awkward]
    assert bool(gradients_are_finite(awkward))
    for gradient, kept in zip(awkward, before, strict=True):
        assert torch.equal(gradient.view(torch.uint8), kept.view(torch.uint8))  # the bits, signed zero included
    for bad in (float("nan"), float("inf"), float("-inf")):
        for position in range(len(awkward)):
            broken = [gradient.clone() for gradient in awkward]
            broken[position].view(-1)[-1] = bad
            assert not bool(gradients_are_finite(broken)), (bad, position)
    finite = {"loss_actor": torch.tensor(1.0)}
    broken = [gradient.clone() for gradient in awkward]
    broken[1][5, 7] = float("nan")
    assert find_nonfinite(finite, {"loss_actor": broken}) == "gradient of loss_actor"  # no norm given: this kernel
    assert find_nonfinite(finite, {"loss_actor": awkward}) is None
