"""The compiled twin (``compile_physics``: ``torch.compile`` of the step's physics) steps exactly as the eager one.

Its own file: compiling takes ~30-60 s on the 2-core CPU; pytest-xdist (``--dist worksteal``) runs it beside the
other twin tests instead of after them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tensordict import TensorDict
from torchrl.envs.utils import step_mdp

from iquitos_lightning.envs.citylearn import make_iquitos_env
from iquitos_lightning.envs.twin import IquitosTwin

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"


@pytest.mark.parametrize(("layout", "objective"), [("per_socket", "thesis"), ("fleet", "tariff")])
def test_the_compiled_twin_gives_the_eager_twins_observations_and_rewards_bit_for_bit(
    tmp_path: Path, layout: str, objective: str
) -> None:
    """Both observation layouts: ``full`` (per_socket) and ``compact`` (fleet, its band sums inside the step)."""
    citylearn = make_iquitos_env(TINY, data_root=tmp_path)
    options = {"layout": layout, "objective": objective}
    twins = [
        IquitosTwin(citylearn.schema_path, citylearn.series, num_envs=3, compile_physics=compiled, **options)
        for compiled in (False, True)
    ]
    assert "_simulate" in vars(twins[1]) and "_simulate" not in vars(twins[0])  # the compiled one is compiled
    generator = torch.Generator().manual_seed(0)
    states = [twin.reset() for twin in twins]
    for _ in range(30):  # a day and more: BESS charge and discharge, arrivals and departures
        action = torch.rand(3, twins[0].action_spec.shape[-1], generator=generator) * 2 - 1
        steps = [twin.step(TensorDict({"action": action.clone()}, batch_size=[3])) for twin in twins]
        eager, compiled = (step["next"] for step in steps)
        assert torch.equal(eager["observation"], compiled["observation"])
        assert torch.equal(eager["reward"], compiled["reward"])
        states = [step_mdp(step) for step in steps]
    assert states[0]["observation"].abs().sum() > 0
