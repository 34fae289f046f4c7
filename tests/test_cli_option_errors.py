"""A bad value in any option group, or a key that moved, is one ``error:`` line with exit status 2, naming the option,
the value and what is allowed (or where the key lives now): issue 81's probes on the card's PPO profile.

They ran into a jsonargparse traceback with the whole namespace dumped (exit 1, the env's ``backend`` and ``training``
groups), or a riddle (``env.num_envs 8``: "did you mean 'num_envs'?"). Each probe fails while the command line is
parsed or its classes are built, before any env exists: in this process (no second ~10 s of imports), the run's
folders under ``tmp_path``, and ``--trainer.max_steps 0`` so that a probe that stopped failing builds its env and
stops instead of training the profile's 8 M frames.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iquitos_lightning.cli import one_line_parse_error, run_lightning_cli

PROFILE = ["fit", "--config", "configs/ppo_cpu.yaml"]
ENV = "--model.init_args.env"


def _refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str], *override: str) -> str:
    """The profile's ``fit`` with ``override``: asserts exit status 2 and one line on stderr, and returns that line."""
    keep_out = ["--trainer.logger.init_args.save_dir", str(tmp_path), "--tracking.wandb=false", "--trainer.max_steps=0"]
    code = run_lightning_cli([*PROFILE, *keep_out, *override])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


@pytest.mark.parametrize(
    ("override", "says"),
    [
        (
            [f"{ENV}.backend.num_envs", "-3"],
            "error: model.init_args.env: backend.num_envs must be >= 1, got -3",
        ),
        (
            [f"{ENV}.backend.device", "tpu"],
            "error: model.init_args.env: backend.device must be one of ('cpu', 'training'), got 'tpu'",
        ),
        (
            [f"{ENV}.training.episode_hours", "-5"],
            "error: model.init_args.env: training.episode_hours must be >= 1 or null, got -5",
        ),
        (
            [f"{ENV}.episodes.max_steps", "-3"],
            "error: model.init_args.env: episodes.max_steps must be >= 1 or null, got -3",
        ),
        (
            [f"{ENV}.num_envs", "8"],
            "error: unknown option 'num_envs': it moved to model.init_args.env.backend.num_envs "
            "(YAML: env: {backend: {num_envs: ...}})",
        ),
        (
            [f"{ENV}.actions", "fleet"],
            "error: unknown option 'actions': it moved to model.init_args.env.layout (YAML: env: {layout: ...})",
        ),
    ],
)
def test_the_issues_probes_are_one_line_naming_the_option_and_the_fix(override, says, tmp_path, capsys):
    assert _refusal(tmp_path, capsys, *override) == says


@pytest.mark.parametrize(
    ("override", "says"),
    [
        (  # not checked until the twin was built, ~30 s into the run
            [f"{ENV}.training.start", "bogus"],
            "error: model.init_args.env: training.start must be one of ('zero', 'staggered', 'random'), got 'bogus'",
        ),
        ([f"{ENV}.backend.num_envs", "abc"], "error: backend.num_envs must be int, got 'abc'"),
        ([f"{ENV}.training.episode_hours", "x"], "error: training.episode_hours must be int or null, got 'x'"),
        (
            [f"{ENV}.backend", "twin"],
            "error: backend is a group now: its value moved to model.init_args.env.backend.train "
            "(YAML: env: {backend: {train: ...}})",
        ),
        (
            [f"{ENV}.start", "staggered"],
            "error: unknown option 'start': it moved to model.init_args.env.training.start "
            "(YAML: env: {training: {start: ...}})",
        ),
        (
            [f"{ENV}.seed", "5"],
            "error: unknown option 'seed': it moved to model.init_args.env.episodes.seed "
            "(YAML: env: {episodes: {seed: ...}})",
        ),
        (
            [f"{ENV}.data_root", "elsewhere"],
            "error: unknown option 'data_root': it moved to model.init_args.env.backend.data_root "
            "(YAML: env: {backend: {data_root: ...}})",
        ),
        (  # a seed given elsewhere than under the env is not sent to the env's episodes
            ["--model.init_args.rollout.seed", "5"],
            "error: unknown option 'seed' (all options: python -m iquitos_lightning <command> --help)",
        ),
        (
            ["--model.init_args.speed.threads", "0"],
            "error: model.speed.threads must be at least 1 (or null: torch's default), got 0",
        ),
        (  # jsonargparse names it 'start' alone, as it does the env's earlier key: not sent to the env
            ["--model.init_args.rollout.start", "3"],
            "error: unknown option 'start' (all options: python -m iquitos_lightning <command> --help)",
        ),
    ],
)
def test_other_bad_values_and_moved_keys_are_one_line_too(override, says, tmp_path, capsys):
    assert _refusal(tmp_path, capsys, *override) == says


def test_an_unknown_option_with_no_fix_to_name_points_to_help_on_the_same_line():
    message = "Option 'bogus' is not accepted"
    line = "unknown option 'bogus' (all options: python -m iquitos_lightning <command> --help)"
    assert one_line_parse_error(message, ["layout", "objective"]) == line
    # a key named like a moved env key elsewhere than under the env is not sent there, dotted or refused by a parser
    # whose options are not the env's (jsonargparse gives the last part alone)
    assert "moved" not in one_line_parse_error("Option 'trainer.num_envs' is not accepted", [])
    assert "moved" not in one_line_parse_error("Option 'start' is not accepted", ["eval_episodes", "frame_budget"])
    assert "moved" in one_line_parse_error(
        "Option 'start' is not accepted", ["backend", "episodes", "layout", "training"]
    )
