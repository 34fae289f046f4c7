"""Bad input gets one line naming the field and what is valid, exit status 2, and no traceback."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import pandas as pd
import pytest
from robust_testkit import REPO, load, pendulum_sac_args

sys.path.insert(0, str(REPO / "tests" / "agents"))
from agents_testkit import cpu_trainer  # noqa: E402

from iquitos_lightning.__main__ import main  # noqa: E402
from iquitos_lightning.agents import PPO, SAC, EnvConfig, RolloutConfig  # noqa: E402
from iquitos_lightning.cli import run_lightning_cli  # noqa: E402
from iquitos_lightning.envs.env_config import Episodes
from iquitos_lightning.errors import ConfigError  # noqa: E402
from iquitos_lightning.site.build import build_site  # noqa: E402
from iquitos_lightning.site.config import load_site_config  # noqa: E402
from iquitos_lightning.site.validate import SiteDataError  # noqa: E402

TINY = REPO / "configs" / "site" / "tiny.yaml"


def _refused(capsys: pytest.CaptureFixture[str], code: int) -> str:
    """The error line; asserts the exit status and that no traceback reached the user."""
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and "error:" in err
    return err


# ----- training configs ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("--model.rollout.frames_per_batch=0", "model.rollout.frames_per_batch must be a positive integer"),
        ("--model.batch_size=40000", r"model.batch_size \(40000\) is larger than model.buffer.capacity \(20000\)"),
        ("--model.buffer.capacity=1000000000000", "Lower --model.buffer.capacity"),
        ("--model.env.name=NoSuchEnv-v9", "model.env.name: unknown environment 'NoSuchEnv-v9'.*Pendulum-v1"),
        ("--model.rollout.eval_every_frames=75", "must be a positive multiple of model.rollout.frames_per_batch"),
    ],
)
def test_bad_training_config_is_refused_naming_the_field(tmp_path, capsys, override, named):
    code = run_lightning_cli([*pendulum_sac_args(tmp_path, frame_budget=100), override])
    assert re.search(named, _refused(capsys, code))


def test_ppo_minibatch_larger_than_the_rollout_is_refused(tmp_path, capsys):
    args = pendulum_sac_args(tmp_path, frame_budget=100)[:8] + ["--model=PPO", "--model.minibatch_size=64"]
    err = _refused(capsys, run_lightning_cli(args))
    assert "model.minibatch_size (64) must be in [1, model.rollout.frames_per_batch = 50]" in err


def _checkpoint_of(agent: pl.LightningModule, path: Path) -> Path:
    cpu_trainer().fit(agent)
    agent.trainer.save_checkpoint(path)
    return path


@pytest.fixture(scope="module")
def foreign_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("foreign")
    rollout = RolloutConfig(frame_budget=50, frames_per_batch=50, eval_every_frames=50, eval_episodes=0)
    pendulum = EnvConfig(name="Pendulum-v1", episodes=Episodes(max_steps=50))
    return {
        "ppo": _checkpoint_of(PPO(env=pendulum, rollout=rollout, minibatch_size=50), folder / "ppo.ckpt"),
        "other_task": _checkpoint_of(
            SAC(env=EnvConfig(name="MountainCarContinuous-v0"), rollout=rollout, hidden_sizes=(32, 32)),
            folder / "mountain_car.ckpt",
        ),
    }


@pytest.mark.parametrize(
    ("which", "named"),
    [
        ("ppo", "the checkpoint is of PPO on Pendulum-v1 .*; this run is SAC on Pendulum-v1"),
        (
            "other_task",
            "is of SAC on MountainCarContinuous-v0 \\(observation size 2, .*; this run is SAC on Pendulum-v1",
        ),
    ],
)
def test_checkpoint_of_another_agent_or_task_is_refused_before_torch_sees_it(
    tmp_path, capsys, foreign_checkpoints, which, named
):
    code = run_lightning_cli(
        [*pendulum_sac_args(tmp_path, frame_budget=100), f"--ckpt_path={foreign_checkpoints[which]}"]
    )
    assert re.search(named, _refused(capsys, code))


def test_checkpoint_of_another_site_is_refused_by_its_observation_size(foreign_checkpoints):
    """Same agent and env id, another site (other sockets): the sizes decide, before load_state_dict would fail."""
    agent = SAC(env=EnvConfig(name="Pendulum-v1"), hidden_sizes=(32, 32))
    other_site = load(foreign_checkpoints["other_task"])
    other_site["rl_state"]["identity"]["env"] = "Pendulum-v1"
    with pytest.raises(ConfigError, match=r"observation size 2.*observation size 3.*\(observation_size differ\)"):
        agent.check_checkpoint_fits(other_site)
    other_site["rl_state"].pop("identity")  # an older checkpoint: the tensor shapes still decide
    with pytest.raises(ConfigError, match="networks do not fit this SAC .* tensors of another shape"):
        agent.check_checkpoint_fits(other_site)


def test_missing_checkpoint_file_is_refused(tmp_path, capsys):
    code = run_lightning_cli([*pendulum_sac_args(tmp_path, frame_budget=100), f"--ckpt_path={tmp_path / 'nope.ckpt'}"])
    assert "checkpoint not found" in _refused(capsys, code)


def test_a_truncated_checkpoint_is_refused_through_the_cli(tmp_path, capsys, foreign_checkpoints):
    """A checkpoint cut short (a copy interrupted, a disk that filled) is one error line, not a torch traceback."""
    whole = foreign_checkpoints["ppo"].read_bytes()
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(whole[: len(whole) // 2])
    code = run_lightning_cli([*pendulum_sac_args(tmp_path, frame_budget=100), f"--ckpt_path={truncated}"])
    said = _refused(capsys, code)
    assert f"checkpoint {truncated} cannot be loaded" in said and "may be truncated" in said


# ----- site data ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site") / "tiny"
    build_site(load_site_config(TINY), folder, progress=False)
    return folder


def _corrupt_copy(tiny_build: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    shutil.copytree(tiny_build, folder)
    return folder


def _edit_csv(path: Path, edit) -> None:  # noqa: ANN001 - a function of a DataFrame
    frame = pd.read_csv(path)
    edit(frame)
    frame.to_csv(path, index=False)


def _short(folder: Path) -> None:
    lines = (folder / "weather.csv").read_text().splitlines()
    (folder / "weather.csv").write_text("\n".join(lines[:100]) + "\n")


def _nan(folder: Path) -> None:
    _edit_csv(
        folder / "series.csv", lambda frame: frame.__setitem__("mall_kw", frame["mall_kw"].where(frame.index != 42))
    )


def _watts(folder: Path) -> None:
    _edit_csv(folder / "series.csv", lambda frame: frame.__setitem__("pv_kw", frame["pv_kw"] * 1000))


def _overlap(folder: Path) -> None:
    def add_overlapping_session(frame: pd.DataFrame) -> None:
        frame.loc[len(frame)] = frame.iloc[0]  # a second EV on the same socket at the same hours

    _edit_csv(folder / "sessions.csv", add_overlapping_session)


@pytest.mark.parametrize(
    ("corrupt", "named"),
    [
        (lambda folder: (folder / "pricing.csv").unlink(), r"pricing\.csv: file missing"),
        (_short, r"weather\.csv: 99 data rows, expected 169"),
        (_nan, r"column mall_kw has 1 NaN/infinite values, first at row 42"),
        (_watts, r"column pv_kw peaks at .* above pv\.ac_limit_kw = 100\.0 kW: wrong units\?"),
        (_overlap, r"socket \d+ has overlapping sessions: row \d+ .* and row \d+"),
    ],
    ids=["missing-csv", "short-csv", "nan", "watts-for-kilowatts", "overlapping-sessions"],
)
def test_bad_site_data_is_refused_naming_file_and_column(tiny_build, tmp_path, capsys, corrupt, named):
    folder = _corrupt_copy(tiny_build, tmp_path)
    corrupt(folder)
    with pytest.raises(SiteDataError, match=named):
        build_site(load_site_config(TINY), folder, progress=False)
    code = main(["build-site", "--site", str(TINY), "--out", str(folder)])
    assert re.search(named, _refused(capsys, code))


def test_a_clean_cached_build_passes_every_check(tiny_build):
    cached = build_site(load_site_config(TINY), tiny_build, progress=False)
    assert cached.cached and np.isfinite(cached.series.pv_kw).all()
