"""A profile over its base (``base:``, :mod:`iquitos_lightning.profile.bases`): the merge, its refusals, and the CLI
reading an overlay as the whole config it stands for."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from iquitos_lightning.cli import run_lightning_cli
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.profile.bases import merged, profile_yaml
from iquitos_lightning.profile.explicit_settings import explicit_keys

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "smoke.yaml"


def test_mappings_merge_key_by_key_and_anything_else_is_replaced() -> None:
    base = {"trainer": {"precision": "32-true", "devices": 1}, "sizes": [256, 256], "lr": 1.0, "extra": {"a": 1}}
    overlay = {"trainer": {"precision": "bf16-mixed"}, "sizes": [64], "extra": None}
    expected = {"trainer": {"precision": "bf16-mixed", "devices": 1}, "sizes": [64], "lr": 1.0, "extra": None}
    assert merged(base, overlay) == expected
    assert base["trainer"] == {"precision": "32-true", "devices": 1}  # the base itself is left as it was


def test_another_class_replaces_the_bases_arguments_and_a_class_path_comes_first() -> None:
    base = {"init_args": {"env": {"seed": 0}}, "class_path": "a.SAC"}
    other = {"class_path": "a.PPO", "init_args": {"lr": 1}}
    assert merged(base, other) == other
    same = merged({"init_args": {"env": {"seed": 0}}}, {"class_path": "a.SAC", "init_args": {"lr": 1}})
    assert list(same) == ["class_path", "init_args"] and same["init_args"] == {"env": {"seed": 0}, "lr": 1}


def test_a_base_may_name_its_own_base_and_a_file_without_one_is_read_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "card.yaml").write_text("seed_everything: 0\nmodel: {init_args: {env: {seed: 0, backend: twin}}}\n")
    (tmp_path / "agent.yaml").write_text(
        f"base: {tmp_path / 'card.yaml'}\nmodel: {{init_args: {{env: {{seed: 1}}}}}}\n"
    )
    (tmp_path / "card_cpu.yaml").write_text(f"base: {tmp_path / 'agent.yaml'}\ntrainer: {{precision: 32-true}}\n")
    assert profile_yaml(tmp_path / "card_cpu.yaml") == {
        "seed_everything": 0,
        "model": {"init_args": {"env": {"seed": 1, "backend": "twin"}}},
        "trainer": {"precision": "32-true"},
    }
    assert profile_yaml(SMOKE) == yaml.safe_load(SMOKE.read_text())


@pytest.mark.parametrize(
    ("base", "says"),
    [
        ("configs/base/no_such.yaml", "its base configs/base/no_such.yaml is not a file"),
        ("[1, 2]", "base must be the path of a YAML file"),
        ("LOOP", "its bases loop"),
    ],
)
def test_a_missing_base_a_base_that_is_no_path_and_a_loop_are_one_line_each(tmp_path, base, says, capsys) -> None:
    profile = tmp_path / "profile.yaml"
    if base == "LOOP":
        (tmp_path / "other.yaml").write_text(f"base: {profile}\n")
        base = str(tmp_path / "other.yaml")
    profile.write_text(f"base: {base}\n")
    with pytest.raises(ConfigError, match=says) as refused:
        profile_yaml(profile)
    assert str(refused.value).startswith(f"{profile}: ")
    assert run_lightning_cli(["fit", "--config", str(profile), "--print_config"]) == 2
    err = capsys.readouterr().err
    assert f"error: {profile}: " in err and says in err and "Traceback" not in err


def test_the_cli_reads_an_overlay_as_the_whole_config_and_counts_the_bases_keys_as_written(tmp_path, capsys) -> None:
    overlay = tmp_path / "smoke_overlay.yaml"
    overlay.write_text(f"base: {SMOKE}\nmodel:\n  init_args:\n    batch_size: 16\n    rollout: {{frame_budget: 112}}\n")
    assert run_lightning_cli(["fit", "--config", str(overlay), "--print_config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    model = printed["model"]
    assert model["class_path"] == "iquitos_lightning.agents.SAC" and "base" not in printed
    assert model["init_args"]["batch_size"] == 16 and model["init_args"]["hidden_sizes"] == [32, 32]
    assert (
        model["init_args"]["rollout"]["frame_budget"] == 112 and model["init_args"]["rollout"]["frames_per_batch"] == 56
    )
    written = explicit_keys(["fit", "--config", str(overlay)])
    assert {"model.batch_size", "model.hidden_sizes", "model.rollout.frames_per_batch"} <= written


@pytest.mark.parametrize("agent", ["sac", "ppo", "a2c"])
def test_each_card_profile_is_a_short_overlay_over_its_agents_base(agent: str) -> None:
    """The card's settings are written once, in ``configs/base/``; a card profile names its agent's base."""
    for device in ("cpu", "rtx4060", "auto"):
        text = (REPO / "configs" / f"{agent}_{device}.yaml").read_text()
        assert f"\nbase: configs/base/{agent}.yaml\n" in text, f"{agent}_{device}"
        assert len(text.splitlines()) <= 25, f"{agent}_{device}: more than its card's hardware"
    assert yaml.safe_load((REPO / "configs" / "base" / f"{agent}.yaml").read_text())["base"] == "configs/base/card.yaml"
