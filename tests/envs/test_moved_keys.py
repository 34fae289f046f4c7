"""The table of the env's moved keys: every row points to an option that exists and is no longer where it was, and an
earlier checkpoint's flat keys are read into those places (``EnvConfig.from_mapping``)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from iquitos_lightning.agents.config import as_config, plain
from iquitos_lightning.envs.env_config import Backend, EnvConfig, Episodes, TrainingAids
from iquitos_lightning.envs.moved_keys import GROUPS_THAT_WERE_VALUES, MOVED_ENV_KEYS
from iquitos_lightning.errors import ConfigError


def _option_exists(dotted: str) -> bool:
    """Whether ``dotted`` (relative to the env: ``layout``, ``backend.num_envs``) is an option of EnvConfig now."""
    *groups, name = dotted.split(".")
    config: object = EnvConfig()
    for group in groups:
        config = getattr(config, group)
    return name in {item.name for item in fields(config)}  # type: ignore[arg-type]


@pytest.mark.parametrize(("old", "new"), [*MOVED_ENV_KEYS.items(), *GROUPS_THAT_WERE_VALUES.items()])
def test_every_moved_key_points_to_an_option_that_exists(old: str, new: str) -> None:
    assert _option_exists(new), f"{old} -> {new}: no such option"
    assert old == new.split(".")[0] or not _option_exists(old), f"{old} still lives where it was"


def test_a_checkpoints_flat_keys_are_read_into_their_groups() -> None:
    flat = {"actions": "fleet", "backend": "twin", "eval_backend": "twin", "num_envs": 4, "num_workers": 1,
            "compile_twin": False, "start": "staggered", "episode_hours": 24, "start_peak": "zero",
            "reward_baseline": "uncontrolled", "critic_forecasts": "oracle", "stored_energy_value": 0.4,
            "shaping_gamma": 0.9, "objective": "tariff"}  # fmt: skip
    assert EnvConfig.from_mapping(flat) == EnvConfig(
        layout="fleet",
        objective="tariff",
        backend=Backend(train="twin", evaluate="twin", num_envs=4),
        training=TrainingAids(start="staggered", episode_hours=24, start_peak="zero", reward_baseline="uncontrolled",
                              critic_forecasts="oracle", stored_energy_value=0.4, shaping_gamma=0.9),
    )  # fmt: skip


def test_a_checkpoints_flat_data_root_and_seeds_are_read_into_the_backend_and_the_episodes() -> None:
    """As an agent built from a checkpoint's hparams reads them (``as_config``, agents/base.py)."""
    flat = {"name": "Pendulum-v1", "data_root": "elsewhere", "seed": 5, "eval_seed": 77, "max_episode_steps": 40}
    assert as_config(EnvConfig, flat) == EnvConfig(
        name="Pendulum-v1",
        backend=Backend(data_root="elsewhere"),
        episodes=Episodes(seed=5, eval_seed=77, max_steps=40),
    )


def test_the_nested_form_is_read_as_it_is_and_survives_the_hparams_round_trip() -> None:
    config = EnvConfig(
        name="Pendulum-v1", backend=Backend(num_workers=2, data_root="d"), episodes=Episodes(seed=3, max_steps=9)
    )
    assert as_config(EnvConfig, plain(config)) == config
    assert plain(config)["episodes"] == {"seed": 3, "eval_seed": 10_000, "max_steps": 9}


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: Backend(num_envs=-3), "backend.num_envs must be >= 1, got -3"),
        (lambda: Backend(device="tpu"), r"backend.device must be one of \('cpu', 'training'\), got 'tpu'"),
        (lambda: TrainingAids(episode_hours=-5), "training.episode_hours must be >= 1 or null, got -5"),
        (lambda: TrainingAids(start="noon"), r"training.start must be one of \('zero', 'staggered', 'random'\)"),
        (lambda: Episodes(max_steps=-3), "episodes.max_steps must be >= 1 or null, got -3"),
        (lambda: Episodes(seed=-1), r"episodes.seed must be >= 0 \(a reset's seed\), got -1"),
        (lambda: Episodes(eval_seed=-2), r"episodes.eval_seed must be >= 0 \(a reset's seed\), got -2"),
    ],
)
def test_a_group_built_on_its_own_refuses_a_bad_value_as_a_config_error(build, says: str) -> None:
    """jsonargparse builds ``env.backend`` and ``env.training`` before the EnvConfig that holds them: each group's
    refusal must itself be the one-line ConfigError (a ValueError ended in a traceback)."""
    with pytest.raises(ConfigError, match=f"^model.init_args.env: {says}"):
        build()


def test_a_length_of_episodes_is_a_gymnasium_ids_the_sites_episode_is_its_year() -> None:
    with pytest.raises(
        ConfigError, match="^model.init_args.env: episodes.max_steps is a Gymnasium id's episode length"
    ):
        EnvConfig(episodes=Episodes(max_steps=24))
    assert EnvConfig(name="Pendulum-v1", episodes=Episodes(max_steps=24)).episodes.max_steps == 24
