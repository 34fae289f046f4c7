"""``env_specs`` sizes a run from the site config alone: its shapes must be the built env's, for every action layout
and objective (the auto profile and the memory check size networks and buffers from them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iquitos_lightning.envs.factory import EnvConfig, env_specs, make_env

TINY = str(Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml")


@pytest.mark.parametrize("actions", ["per_socket", "fleet"])
@pytest.mark.parametrize("objective", ["thesis", "tariff"])
def test_specs_without_a_site_build_match_the_built_env(actions: str, objective: str) -> None:
    config = EnvConfig(site=TINY, actions=actions, objective=objective)
    built, specs = make_env(config), env_specs(config)
    try:
        assert specs.observation_spec["observation"].shape == built.observation_spec["observation"].shape
        assert specs.action_spec.shape == built.action_spec.shape
    finally:
        built.close()
        specs.close()
