"""TrainingTwin writes what the twin + StepCounter + RewardSum + finite-check stack wrote, value for value, and a
collector gathers the same rollouts from both, partial resets and a collector rebuilt mid-episode included."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torchrl.collectors import Collector
from torchrl.envs import EnvBase, RewardSum, StepCounter, Transform, TransformedEnv

from iquitos_lightning.envs.finite import NonFiniteEnvValue, check_finite_batch
from iquitos_lightning.envs.training_twin import TrainingTwin, make_torchrl_twin
from iquitos_lightning.envs.twin import IquitosTwin, make_twin
from tests.envs.twin_testkit import OPTIONS, TINY


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


class _FiniteCheck(Transform):
    """The finite-value check as the transform it was before TrainingTwin."""

    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        check_finite_batch(next_tensordict, "iquitos twin", self.names, "step")
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        check_finite_batch(tensordict_reset, "iquitos twin", self.names, "reset")
        return tensordict_reset


def _stack(data_root: Path) -> TransformedEnv:
    twin = make_twin(TINY, data_root=data_root, **OPTIONS)
    env = TransformedEnv(twin, StepCounter())
    env.append_transform(RewardSum())
    env.append_transform(_FiniteCheck(twin.tables.observation_names))
    return env


def _policy(env: EnvBase) -> TensorDictModule:
    """A fixed deterministic policy of the observation, so both envs get the same actions."""
    torch.manual_seed(0)
    inputs = env.observation_spec["observation"].shape[-1]
    layer = torch.nn.Sequential(torch.nn.Linear(inputs, env.action_spec.shape[-1]), torch.nn.Tanh())
    return TensorDictModule(layer, in_keys=["observation"], out_keys=["action"])


def _rollouts(env: EnvBase, policy: TensorDictModule, count: int) -> list[TensorDictBase]:
    collector = Collector(env, policy, frames_per_batch=3 * 8, total_frames=-1, auto_register_policy_transforms=False)
    batches = iter(collector)
    return [next(batches).clone() for _ in range(count)]


def _assert_same(ours: TensorDictBase, theirs: TensorDictBase) -> None:
    assert set(ours.keys(True, True)) == set(theirs.keys(True, True))
    for key in theirs.keys(True, True):
        assert ours[key].dtype == theirs[key].dtype, key
        assert torch.equal(ours[key], theirs[key]), key


def test_the_training_twin_collects_what_the_transformed_twin_collected(data_root: Path) -> None:
    stack, ours = _stack(data_root), make_torchrl_twin(TINY, data_root=data_root, **OPTIONS)
    assert isinstance(ours, TrainingTwin)
    for spec in ("full_observation_spec", "full_state_spec", "full_done_spec", "full_reward_spec", "action_spec"):
        assert getattr(ours, spec) == getattr(stack, spec), spec
    _assert_same(ours.reset(), stack.reset())
    policy = _policy(stack)
    theirs, mine = _rollouts(stack, policy, 4), _rollouts(ours, policy, 4)
    for batch_theirs, batch_mine in zip(theirs, mine, strict=True):
        _assert_same(batch_mine, batch_theirs)
    finished = torch.cat([batch["next", "done"].reshape(-1) for batch in mine])
    assert int(finished.sum()) >= 6  # episodes of 10 h in 32 h of 3 staggered envs: partial resets were compared
    counts = torch.cat([batch["next", "step_count"].reshape(-1) for batch in mine])
    assert int(counts.max()) == 10 and int(counts.min()) >= 1  # truncated at 10 steps, counted from 0 after a reset


def test_a_reset_with_a_mask_restarts_only_those_envs_counters(data_root: Path) -> None:
    twin = make_torchrl_twin(TINY, data_root=data_root, **OPTIONS)
    state = twin.reset()
    state["action"] = torch.zeros(*twin.action_spec.shape)
    state = twin.step(state)["next"]
    state["action"] = torch.zeros(*twin.action_spec.shape)
    state = twin.step(state)["next"]
    assert state["step_count"].reshape(-1).tolist() == [2, 2, 2]
    state["_reset"] = torch.tensor([[False], [True], [False]])
    after = twin.reset(state)
    assert after["step_count"].reshape(-1).tolist() == [2, 0, 2]
    rewards = after["episode_reward"].reshape(-1)
    assert rewards[1] == 0.0 and torch.equal(rewards[[0, 2]], state["episode_reward"].reshape(-1)[[0, 2]])


def test_a_non_finite_observation_stops_the_training_twin_naming_it(data_root: Path) -> None:
    twin = make_torchrl_twin(TINY, data_root=data_root, **OPTIONS)
    assert isinstance(twin, IquitosTwin)
    twin.stacked.observation[:] = float("nan")
    with pytest.raises(NonFiniteEnvValue, match=r"non-finite observation '.*' \(observation\[0\]\) = nan in env 0"):
        twin.reset()
