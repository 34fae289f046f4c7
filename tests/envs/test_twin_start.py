"""Training twins see the year: staggered or random episode starts and episodes of a chosen length."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from iquitos_lightning.envs.factory import EnvConfig
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
    with pytest.raises(ValueError, match="twin backend"):
        EnvConfig(start="staggered")
