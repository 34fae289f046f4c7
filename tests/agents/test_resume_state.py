"""What agents/resume.py adds to a checkpoint, on its own and in seconds: the RNG snapshot, the episode counter to
restore, the identity text and the refusal of a checkpoint that does not fit, on a real small SAC (Pendulum).

The whole resumes (losses, counters and buffer against the uninterrupted run) are in test_resume.py, ~50 s; this
file is the `resume` mutation target's (scripts/mutation.sh).
"""

from __future__ import annotations

import io
import random
import re

import numpy as np
import pytest
import torch
from agents_testkit import small_sac

from iquitos_lightning.agents import SAC
from iquitos_lightning.agents.resume import (
    describe_identity,
    env_resets_on_resume,
    refuse_unfit_checkpoint,
    rng_states,
    set_rng_states,
)
from iquitos_lightning.errors import ConfigError


def _draws() -> list[object]:
    """One draw from every global RNG the training path uses (numpy's legacy normal uses its cached second value)."""
    draws: list[object] = [torch.rand(4), np.random.standard_normal(3), np.random.randint(0, 2**31, 3), random.random()]
    if torch.cuda.is_available():
        draws.append(torch.rand(4, device="cuda").cpu())
    return draws


def _assert_same_draws(ours: list[object], theirs: list[object]) -> None:
    assert len(ours) == len(theirs)
    for mine, other in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(other))


@pytest.fixture
def _global_rngs_restored():
    """The tests below move every global RNG: put them back for the rest of the session."""
    saved = (torch.get_rng_state(), np.random.get_state(), random.getstate())
    yield
    torch.set_rng_state(saved[0])
    np.random.set_state(saved[1])
    random.setstate(saved[2])


def test_the_rng_snapshot_survives_a_weights_only_load_and_repeats_every_draw(_global_rngs_restored) -> None:
    torch.manual_seed(1)
    np.random.seed(2)
    random.seed(3)
    np.random.standard_normal(1)  # numpy now holds the second normal of a pair: it must be saved too
    cached = np.random.get_state()[4]
    states = rng_states()
    assert states["numpy"]["has_gauss"] == 1 and states["numpy"]["cached_gaussian"] == cached != 0.0
    assert states["numpy"]["pos"] == np.random.get_state()[2] > 0
    assert ("cuda" in states) == torch.cuda.is_available()
    buffer = io.BytesIO()
    torch.save(states, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)  # how checkpoints are read back
    expected = _draws()

    torch.manual_seed(99)
    np.random.seed(99)
    random.seed(99)
    _draws()
    set_rng_states(loaded)
    _assert_same_draws(_draws(), expected)
    set_rng_states(states)
    _assert_same_draws(_draws(), expected)


def test_a_checkpoint_from_the_other_kind_of_machine_restores_the_rngs_both_have(_global_rngs_restored) -> None:
    """A GPU run's checkpoint resumed on a CPU machine (its CUDA state has nowhere to go), or a CPU run's on a GPU
    machine (no CUDA state saved: the GPU's own is left alone)."""
    states = rng_states()
    if torch.cuda.is_available():
        del states["cuda"]
    else:
        states["cuda"] = [torch.zeros(16, dtype=torch.uint8)]
    expected = _draws()
    torch.manual_seed(7)
    set_rng_states(states)
    _assert_same_draws(_draws(), expected)


def test_an_agents_checkpoint_carries_the_rngs_into_a_fresh_agent(_global_rngs_restored) -> None:
    agent = small_sac(100)
    checkpoint = {"state_dict": agent.state_dict()}
    agent.on_save_checkpoint(checkpoint)
    expected = _draws()

    torch.manual_seed(999)
    fresh = small_sac(100)
    fresh.on_load_checkpoint(checkpoint)
    fresh.restore_pending_state()  # what the first rollout does once the collector is built
    _assert_same_draws(_draws(), expected)


@pytest.mark.parametrize(
    ("resets_done", "at_boundary", "restored"),
    [(0, True, 0), (1, True, 0), (3, True, 2), (0, False, 0), (1, False, 1), (3, False, 3)],
)
def test_the_env_counter_repeats_the_last_reset_at_a_boundary_and_moves_on_mid_episode(
    resets_done: int, at_boundary: bool, restored: int
) -> None:
    assert env_resets_on_resume(resets_done, at_boundary) == restored


def test_the_identity_reads_as_agent_task_and_sizes() -> None:
    assert describe_identity(small_sac(100).identity()) == "SAC on Pendulum-v1 (observation size 3, action size 1)"
    site = {"agent": "PPO", "env": "iquitos", "site": "tiny", "observation_size": 40, "action_size": 5}
    assert describe_identity(site) == "PPO on iquitos site 'tiny' (observation size 40, action size 5)"


@pytest.fixture(scope="module")
def sac() -> SAC:
    return small_sac(100)


def _checkpoint_of(agent: SAC) -> dict:
    """The agent's checkpoint as read back from disk (``weights_only``): its strings are new objects, not the run's."""
    checkpoint = {"state_dict": agent.state_dict()}
    agent.on_save_checkpoint(checkpoint)
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def _refusal(checkpoint: dict, agent: SAC) -> str:
    with pytest.raises(ConfigError) as refused:
        refuse_unfit_checkpoint(checkpoint, agent.identity(), agent.state_dict())
    return str(refused.value)


def test_a_checkpoint_of_this_agent_fits_with_or_without_the_identity_of_earlier_versions(sac: SAC) -> None:
    checkpoint = _checkpoint_of(sac)
    refuse_unfit_checkpoint(checkpoint, sac.identity(), sac.state_dict())
    del checkpoint["rl_state"]["identity"]  # written before checkpoints named their agent
    refuse_unfit_checkpoint(checkpoint, sac.identity(), sac.state_dict())
    refuse_unfit_checkpoint({"state_dict": sac.state_dict()}, sac.identity(), sac.state_dict())  # no rl_state
    other_site = _checkpoint_of(sac)
    other_site["rl_state"]["identity"]["site"] = "tiny"  # same agent and sizes: the weights load
    refuse_unfit_checkpoint(other_site, sac.identity(), sac.state_dict())


def test_a_checkpoint_of_another_agent_or_size_is_refused_naming_both_and_what_differs(sac: SAC) -> None:
    here = "SAC on Pendulum-v1 (observation size 3, action size 1)"
    checkpoint = _checkpoint_of(sac)
    checkpoint["rl_state"]["identity"]["agent"] = "PPO"
    assert _refusal(checkpoint, sac) == (
        f"--ckpt_path: the checkpoint is of PPO on Pendulum-v1 (observation size 3, action size 1), this run is "
        f"{here} (agent differ): use a checkpoint of the same agent and site, or start without --ckpt_path"
    )
    checkpoint["rl_state"]["identity"] |= {"agent": "SAC", "observation_size": 40, "action_size": 5}
    assert "(observation_size, action_size differ)" in _refusal(checkpoint, sac)


def test_networks_of_another_shape_missing_or_unexpected_are_counted_and_one_is_named(sac: SAC) -> None:
    ours = sac.state_dict()
    first_key = sorted(ours)[0]
    smaller = small_sac(100, hidden_sizes=(16, 16)).state_dict()
    reshaped = sorted(key for key in ours if ours[key].shape != smaller[key].shape)
    assert len(reshaped) >= 4 and len(reshaped) < len(ours)  # the hidden layers' weights and biases, not all
    bigger = small_sac(100, hidden_sizes=(64, 64)).state_dict()
    assert _refusal({"state_dict": bigger}, sac) == _refusal({"state_dict": smaller}, sac)  # larger or smaller
    message = _refusal({"state_dict": smaller}, sac)
    assert message == (
        f"--ckpt_path: the checkpoint's networks do not fit this SAC ({len(reshaped)} tensors of another shape, "
        f"0 missing, 0 unexpected, e.g. {reshaped[0]!r}): it was saved with other model.hidden_sizes or by another "
        "agent or site; use a checkpoint of this configuration, or start without --ckpt_path"
    )
    missing = {key: value for key, value in ours.items() if key != first_key}
    assert f"(0 tensors of another shape, 1 missing, 0 unexpected, e.g. {first_key!r})" in _refusal(
        {"state_dict": missing}, sac
    )
    unexpected = {**ours, "extra.weight": torch.zeros(1)}
    assert "(0 tensors of another shape, 0 missing, 1 unexpected, e.g. 'extra.weight')" in _refusal(
        {"state_dict": unexpected}, sac
    )
    both = {**missing, "extra.weight": torch.zeros(1)}
    assert f"0 tensors of another shape, 1 missing, 1 unexpected, e.g. {first_key!r})" in _refusal(
        {"state_dict": both}, sac
    )
    all_three = {**smaller, "extra.weight": torch.zeros(1)}
    del all_three[first_key]
    counted = re.search(
        r"\((\d+) tensors of another shape, 1 missing, 1 unexpected, e\.g\. '(.*?)'\)",
        _refusal({"state_dict": all_three}, sac),
    )
    assert counted is not None
    shown = [key for key in reshaped if key != first_key]
    assert (int(counted.group(1)), counted.group(2)) == (len(shown), shown[0])
