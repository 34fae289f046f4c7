"""``env_specs`` sizes a run from the site config alone: its shapes must be the built env's, for every action layout,
objective and observation layout (the auto profile and the memory check size networks and buffers from them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iquitos_lightning.envs.env_config import EnvConfig
from iquitos_lightning.envs.factory import env_specs, make_env

TINY = str(Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml")
DEFAULT_SITE = str(Path(__file__).resolve().parents[2] / "configs" / "site" / "iquitos-2026.yaml")


@pytest.mark.parametrize("observation", ["auto", "full", "compact"])
@pytest.mark.parametrize("actions", ["per_socket", "fleet"])
@pytest.mark.parametrize("objective", ["thesis", "tariff"])
def test_specs_without_a_site_build_match_the_built_env(actions: str, objective: str, observation: str) -> None:
    config = EnvConfig(site=TINY, layout=actions, objective=objective, observation=observation)
    built, specs = make_env(config), env_specs(config)
    try:
        assert specs.observation_spec["observation"].shape == built.observation_spec["observation"].shape
        assert specs.action_spec.shape == built.action_spec.shape
    finally:
        built.close()
        specs.close()


@pytest.mark.parametrize(
    ("actions", "objective", "width"),
    [
        ("per_socket", "thesis", 20 + 4 * 128),  # auto keeps the per-socket block for per-socket actions
        ("per_socket", "tariff", 64 + 4 * 128),
        ("fleet", "thesis", 26),  # auto is compact for the fleet-level layouts
        ("self_consumption_window", "tariff", 70),
    ],
)
def test_auto_observation_width_on_the_default_site(actions: str, objective: str, width: int) -> None:
    specs = env_specs(EnvConfig(site=DEFAULT_SITE, layout=actions, objective=objective))
    try:
        assert specs.observation_spec["observation"].shape[-1] == width
    finally:
        specs.close()


def test_an_explicit_full_observation_keeps_the_fleet_layouts_per_socket_block() -> None:
    specs = env_specs(EnvConfig(site=DEFAULT_SITE, layout="fleet", objective="tariff", observation="full"))
    try:
        assert specs.observation_spec["observation"].shape[-1] == 576
    finally:
        specs.close()


def test_an_unknown_observation_layout_is_a_one_line_error_naming_the_key() -> None:
    with pytest.raises(
        ValueError, match=r"^model.init_args.env: observation must be one of \('auto', 'full', 'compact'\), got 'wide'$"
    ):
        EnvConfig(observation="wide")
