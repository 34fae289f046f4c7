"""The compiled twin (``compile_physics``: ``torch.compile`` of the step's physics) steps exactly as the eager one, on
every kept action layout and both objectives.

Why one test per (layout, objective): each pair is its own graph (the layout picks the action mapping and the
observation, ``full`` or ``compact``; the objective the reward's branch), so putting both objectives in one test would
compile no fewer graphs and only keep pytest-xdist from spreading them. Its own file: compiling takes ~5-30 s a graph
on the 2-core CPU; xdist (``--dist worksteal``) runs it beside the other twin tests instead of after them. The device
code path (``env.backend.device: training``) with the card's own options: tests/envs/test_twin_compiled_device.py.

Every test starts from an empty compile cache (``torch._dynamo.reset``): Dynamo keeps at most
``recompile_limit`` graphs of one function and then runs it eagerly without a word, which would make a later test
compare the eager step with itself; each test also checks that it compiled a graph.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict
from torch._dynamo.utils import counters

from iquitos_lightning.envs import arrays
from iquitos_lightning.envs.actions import LAYOUTS
from iquitos_lightning.envs.twin import IquitosTwin, make_twin
from tests.envs.twin_testkit import TINY

ENVS = 3
STEPS = 60  # two days and more: BESS charge and discharge, arrivals and departures
RESUME_AT = 30  # both twins put their own state back here: a compact twin's carried bands are dropped (as a resume or
# a move to another device drops them), so the compiled step also runs with the bands computed inside it


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny site built once for the module's tests (each builds its own twins from it)."""
    return tmp_path_factory.mktemp("data")


@pytest.fixture(autouse=True)
def empty_compile_cache() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiled_graphs() -> int:
    """Graphs Dynamo has captured in this process so far (a step that fell back to eager captures none)."""
    return counters["stats"]["unique_graphs"]


@pytest.mark.parametrize("objective", ["thesis", "tariff"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_compiled_twin_gives_the_eager_twins_observations_and_rewards_bit_for_bit(
    data_root: Path, layout: str, objective: str
) -> None:
    """per_socket: the ``full`` observation (socket SOCs written in the step); fleet and self_consumption_window: the
    ``compact`` one (its band sums inside the step, the bands carried to the next step)."""
    _assert_compiled_steps_as_eager(data_root, layout, objective)


def test_the_written_out_socket_sums_keep_the_compiled_twin_bit_for_bit(
    data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From 256 envs x 128 sockets the compiled step writes its sums over the sockets out as chains of adds
    (envs/arrays.py ``sequential_sum``); the tiny site's few sockets never reach that size, so it is forced here, on
    the card's layout and objective (the window layout's compact observation and fleet fill use every such sum)."""
    monkeypatch.setattr(arrays, "WRITTEN_OUT_MIN_ELEMENTS", 0)
    _assert_compiled_steps_as_eager(data_root, "self_consumption_window", "tariff")


def _assert_compiled_steps_as_eager(data_root: Path, layout: str, objective: str) -> None:
    options = {"num_envs": ENVS, "layout": layout, "objective": objective}
    twins = [make_twin(TINY, data_root=data_root, compile_physics=compiled, **options) for compiled in (False, True)]
    assert "_simulate" in vars(twins[1]) and "_simulate" not in vars(twins[0])  # the compiled one is compiled
    graphs = compiled_graphs()
    generator = torch.Generator().manual_seed(0)
    for twin in twins:
        twin.reset()
    for step in range(STEPS):
        if step == RESUME_AT:
            for twin in twins:
                twin.load_resume_state(twin.resume_state())
        action = torch.rand(ENVS, twins[0].action_size, generator=generator) * 2 - 1
        eager, compiled = (_step(twin, action) for twin in twins)
        assert torch.equal(eager["observation"], compiled["observation"]), step
        assert torch.equal(eager["reward"], compiled["reward"]), step
    assert compiled_graphs() > graphs  # the compiled twin ran a captured graph, not the eager fallback
    assert eager["observation"].abs().sum() > 0 and eager["reward"].abs().sum() > 0
    states = [twin.resume_state()["tensors"] for twin in twins]  # clocks, SOCs, capacities, peaks...
    assert all(torch.equal(value, states[1][name]) for name, value in states[0].items())


def _step(twin: IquitosTwin, action: torch.Tensor) -> TensorDict:
    return twin.step(TensorDict({"action": action.clone()}, batch_size=[ENVS]))["next"]


def test_without_a_cpp_compiler_the_compiled_twin_warns_once_and_steps_eagerly(
    data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A laptop without g++ (or MSVC) runs ``ppo_cpu`` (``backend.compile: true``) eagerly, with a warning that names
    the fix, instead of failing inside Inductor at the first step."""
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(data_root))  # a folder without any compiler
    with pytest.warns(UserWarning, match="no C\\+\\+ compiler found") as warned:
        twin = make_twin(TINY, data_root=data_root, num_envs=ENVS, compile_physics=True)
    assert len(warned) == 1
    graphs = compiled_graphs()
    twin.reset()
    assert _step(twin, torch.zeros(ENVS, twin.action_size))["reward"].shape[0] == ENVS
    assert compiled_graphs() == graphs  # nothing was captured: the step ran eagerly
