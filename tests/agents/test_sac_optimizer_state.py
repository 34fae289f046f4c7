"""SAC steps one Adam with a parameter group per network (actor, critic, alpha); earlier versions stepped three Adams.
A checkpoint of such a run holds three optimizer states: it resumes with their moments, exactly as a checkpoint of
this version does (agents/sac.py ``on_load_checkpoint``, agents/resume.py ``merged_optimizer_state``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from agents_testkit import StopAtFrames, cpu_trainer, frame_checkpoint, small_sac

from iquitos_lightning.agents.resume import merged_optimizer_state


def _as_three_optimizers(state: dict[str, Any]) -> list[dict[str, Any]]:
    """One optimizer's state dict as the state dicts of an optimizer per parameter group (each numbered from 0)."""
    states = []
    for group in state["param_groups"]:
        first = group["params"][0]
        states.append(
            {
                "state": {index - first: state["state"][index] for index in group["params"] if index in state["state"]},
                "param_groups": [{**group, "params": [index - first for index in group["params"]]}],
            }
        )
    return states


def test_three_optimizer_states_merge_into_the_one_optimizers() -> None:
    parameters = [torch.nn.Parameter(torch.randn(size)) for size in (3, 2, 4, 1)]
    optimizer = torch.optim.Adam(
        [{"params": parameters[:2], "lr": 0.1}, {"params": parameters[2:3], "lr": 0.2}, {"params": parameters[3:]}],
        lr=0.3,
    )
    sum(parameter.square().sum() for parameter in parameters).backward()
    optimizer.step()
    state = optimizer.state_dict()
    merged = merged_optimizer_state(_as_three_optimizers(state))
    assert merged["param_groups"] == state["param_groups"]
    assert merged["state"].keys() == state["state"].keys()
    for index, moments in state["state"].items():
        assert all(torch.equal(merged["state"][index][name], value) for name, value in moments.items())


def test_a_checkpoint_with_the_three_optimizers_of_earlier_versions_resumes_as_this_versions(tmp_path: Path) -> None:
    pl.seed_everything(11)
    first = small_sac(250)
    cpu_trainer(tmp_path, callbacks=[frame_checkpoint(tmp_path, 150), StopAtFrames(150)]).fit(first)
    this_version = tmp_path / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(this_version, weights_only=False)
    (state,) = checkpoint["optimizer_states"]
    assert [len(group["params"]) for group in state["param_groups"]][2] == 1  # actor, critic, alpha (log_alpha)
    earlier_version = tmp_path / "earlier.ckpt"
    torch.save({**checkpoint, "optimizer_states": _as_three_optimizers(state)}, earlier_version)

    weights = {}
    for name, path in (("this", this_version), ("earlier", earlier_version)):
        pl.seed_everything(999)  # the checkpoint decides what happens next
        resumed = small_sac(250)
        cpu_trainer(tmp_path / name).fit(resumed, ckpt_path=str(path))
        assert resumed.frames_done == 250 and resumed.updates_done == 250
        weights[name] = resumed.state_dict()
    differ = [key for key, value in weights["this"].items() if not torch.equal(weights["earlier"][key], value)]
    assert not differ, differ
