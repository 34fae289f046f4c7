"""Training twins see the year: staggered or random episode starts, episodes of a chosen length, and a saved state
they go on from mid-episode (exact resume). The month's peak a reference run has at the start hour (the start peaks,
handed to the twin as a table) is tested with the run that makes it: tests/control/test_reference_tables.py."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
import torch
from tensordict import TensorDict

from iquitos_lightning.envs.actions import socket_bands
from iquitos_lightning.envs.env_config import EnvConfig, TrainingAids
from iquitos_lightning.envs.twin import make_twin

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"  # 7 days: 168 hours


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


def _run(twin, steps: int) -> TensorDict:
    action = torch.zeros(twin.num_envs, twin.action_size)
    out = None
    for _ in range(steps):
        out = twin.step(TensorDict({"action": action}, batch_size=[twin.num_envs]))["next"]
    return out


def test_staggered_envs_start_spread_over_the_year_and_truncate_after_episode_hours(data_root: Path) -> None:
    twin = make_twin(TINY, data_root=data_root, num_envs=4, start="staggered", episode_hours=24)
    first = twin.reset()
    assert twin._state.t.tolist() == [0, 42, 84, 126]  # env b of 4 at b x 168 / 4
    hour_features = first["observation"][:, :2]  # hour_sin, hour_cos: different times of day/year
    assert len({tuple(row.tolist()) for row in hour_features}) > 1
    after_23 = _run(twin, 23)
    assert not after_23["done"].any()
    after_24 = _run(twin, 1)
    assert after_24["truncated"].all() and not after_24["terminated"].any() and after_24["done"].all()
    twin.reset()
    assert twin._state.t.tolist() == [24, 66, 108, 150]  # each next episode starts where the last one ended
    _run(twin, 18)  # env 3 reaches the year's end (150 + 18 = 168): terminated there, the others run on
    assert twin._state.t.tolist() == [42, 84, 126, 168]


def test_random_starts_are_reproducible_from_the_seed_and_leave_room_for_the_episode(data_root: Path) -> None:
    starts = []
    for _ in range(2):
        twin = make_twin(TINY, data_root=data_root, num_envs=8, start="random", episode_hours=48, seed=3)
        twin.reset()
        starts.append(twin._state.t.tolist())
    assert starts[0] == starts[1] and len(set(starts[0])) > 1
    assert all(0 <= start <= 168 - 48 for start in starts[0])


def test_the_default_twin_still_runs_citylearns_year_from_hour_zero(data_root: Path) -> None:
    twin = make_twin(TINY, data_root=data_root, num_envs=2)
    twin.reset()
    assert twin._state.t.tolist() == [0, 0]
    assert not _run(twin, 167)["done"].any()
    assert _run(twin, 1)["terminated"].all()


def test_start_schedules_are_refused_off_the_twin() -> None:
    with pytest.raises(ValueError, match="training.start: the twin.s training aids need backend.train: twin"):
        EnvConfig(training=TrainingAids(start="staggered"))


def _saved_and_loaded(value: object) -> object:
    """``value`` through ``torch.save`` and a ``weights_only`` load: how a checkpoint's ``rl_state`` comes back."""
    buffer = io.BytesIO()
    torch.save(value, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def _steps(twin, carried: TensorDict, actions: torch.Tensor) -> tuple[TensorDict, TensorDict]:
    """``actions`` [steps, B, A] stepped from ``carried`` (what a collector carries), done envs reset as a collector
    does (their next episode drawn by the start schedule): the stacked transitions and what is carried on."""
    transitions = []
    for action in actions:
        carried = carried.clone()
        carried["action"] = action
        transition, carried = twin.step_and_maybe_reset(carried)
        transitions.append(transition)
    return torch.stack(transitions), carried


@pytest.mark.parametrize(("start", "layout"), [("staggered", "per_socket"), ("random", "fleet")])
def test_a_twin_given_its_saved_state_goes_on_mid_episode_as_the_original(
    data_root: Path, start: str, layout: str
) -> None:
    """resume_state/load_resume_state (the exact resume of agents/resume.py): a new twin, reset as a new collector
    resets it and then given the saved state, steps on exactly as the original, through resets (the schedule's
    next starts, the "random" generator), SOCs, peaks and the recorded flows."""
    options = {"num_envs": 3, "start": start, "episode_hours": 10, "seed": 5, "objective": "tariff", "record": True}
    original = make_twin(TINY, data_root=data_root, layout=layout, **options)  # fleet: compact, carried bands
    actions = torch.rand(55, 3, original.action_size, generator=torch.Generator().manual_seed(0)) * 2 - 1
    _, carried = _steps(original, original.reset(), actions[:25])  # every env mid-way through its third episode
    assert not carried["done"].any() and (original._state.t - original._state.start).tolist() == [5, 5, 5]
    saved = _saved_and_loaded(original.resume_state())
    expected, _ = _steps(original, carried, actions[25:])

    resumed = make_twin(TINY, data_root=data_root, layout=layout, **options)
    resumed.reset()  # as a new collector does when it is built: moves the schedule on, which the load undoes
    resumed.load_resume_state(saved)
    assert resumed.resets_done == 3
    went_on, _ = _steps(resumed, carried, actions[25:])
    for key in expected.keys(True, True):
        assert torch.equal(went_on[key], expected[key]), key
    for env in range(3):
        pd.testing.assert_frame_equal(resumed.flows(env), original.flows(env))
        pd.testing.assert_frame_equal(resumed.departures(env), original.departures(env))

    fresh = make_twin(TINY, data_root=data_root, layout=layout, **options)
    fresh.reset()
    restarted, _ = _steps(fresh, carried, actions[25:])  # without the saved state: another run
    assert not torch.equal(restarted["next", "observation"], expected["next", "observation"])


def test_a_saved_twin_state_of_another_batch_is_refused_and_changes_nothing(data_root: Path) -> None:
    saved = make_twin(TINY, data_root=data_root, num_envs=3, start="staggered").resume_state()
    other = make_twin(TINY, data_root=data_root, num_envs=2, start="staggered")
    other.reset()
    before = other.resume_state()
    with pytest.raises(ValueError, match=r"saved twin state's t is torch.int64 \(3,\), this twin's torch.int64 \(2,\)"):
        other.load_resume_state(saved)
    after = other.resume_state()
    assert after["resets_done"] == before["resets_done"] == 1
    assert all(torch.equal(after["tensors"][name], value) for name, value in before["tensors"].items())
    with pytest.raises(ValueError, match="holds"):  # a twin recording KPIs keeps two tables more
        make_twin(TINY, data_root=data_root, num_envs=3, record=True).load_resume_state(saved)


def test_the_bands_a_compact_twin_carries_are_those_its_step_would_compute_through_partial_resets(
    data_root: Path,
) -> None:
    """The compact observation computes the next hour's socket bands; the twin carries them into that step instead
    of computing them again. Bit for bit what the step computes from its state, resets included, so a twin that
    carries them steps exactly as one that recomputes them every step."""
    options = {"num_envs": 4, "layout": "fleet", "objective": "tariff", "start": "staggered"}
    twins = [make_twin(TINY, data_root=data_root, episode_hours=30, **options) for _ in range(2)]
    carrying, recomputing = twins
    generator = torch.Generator().manual_seed(0)
    tensordicts = [twin.reset() for twin in twins]
    partial_resets = 0
    for _ in range(150):  # env 3 ends its 2nd episode at the year's end while the others run on: partial resets
        state, tables = carrying._state, carrying.stacked
        row = state.t + carrying._row_offset
        expected = socket_bands(
            tables.connected[row],
            state.soc[:, 1:],
            tables.required_soc[row],
            tables.hours_left[row],
            tables.battery_kwh,
            tables.charger_kw,
        )
        for name in ("low", "high", "laxity_h", "need_kwh"):
            assert torch.equal(getattr(state.bands, name), getattr(expected, name)), name
        recomputing._state.bands = None  # its step computes the bands itself, as before the twin carried them
        action = torch.rand(4, 2, generator=generator) * 2 - 1
        steps = []
        for twin, tensordict in zip(twins, tensordicts, strict=True):
            tensordict["action"] = action.clone()
            steps.append(twin.step_and_maybe_reset(tensordict))
        (out_a, next_a), (out_b, next_b) = steps
        for key in ("observation", "reward", "done", "terminated"):
            assert torch.equal(out_a["next", key], out_b["next", key]), key
        assert torch.equal(next_a["observation"], next_b["observation"])
        done = out_a["next", "done"]
        partial_resets += int(bool(done.any()) and not bool(done.all()))
        tensordicts = [next_a, next_b]
    assert partial_resets > 0
