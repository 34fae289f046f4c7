"""What a user meets in the first hour: the card's GPU command on a CPU machine, resuming nothing, library noise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from iquitos_lightning.cli import run_lightning_cli
from iquitos_lightning.profile.devices import AcceleratorUnavailable, refuse_gpu_profile_without_cuda
from iquitos_lightning.training.run_folder import claim_run_folder, move_aside

REPO = Path(__file__).resolve().parents[1]
NO_CUDA = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "WANDB_MODE": "disabled"}


@pytest.mark.cpu_only  # on a GPU machine: in a child pytest with the GPU hidden (tests/conftest.py)
def test_the_rtx4060_profile_on_a_machine_without_cuda_stops_at_once_naming_the_cpu_profile(capsys) -> None:
    """In this process (``run_lightning_cli`` is what ``python -m iquitos_lightning fit`` runs; the exit status of a
    real process is checked by the CityLearn test below): refused before anything is built."""
    assert run_lightning_cli(["fit", "--config", "configs/sac_rtx4060.yaml"]) == 2
    stderr = capsys.readouterr().err
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert (
        len(errors) == 1 and "--config configs/sac_cpu.yaml" in errors[0] and "--trainer.accelerator cpu" in errors[0]
    )
    # what it would have cost: 786,432 frames x 0.25 updates per frame at 60-120 updates/s (64x64 networks)
    assert "196,608 SAC updates, about 0.5-0.9 h on a 2-core CPU" in errors[0]
    assert "Traceback" not in stderr


def test_a_gpu_profile_runs_on_the_cpu_when_the_user_says_so_on_the_command_line() -> None:
    files = ["configs/sac_rtx4060.yaml"]
    with pytest.raises(AcceleratorUnavailable, match="sac_cpu.yaml"):
        refuse_gpu_profile_without_cuda("16-mixed", files, set(), cuda_available=False)
    refuse_gpu_profile_without_cuda("16-mixed", files, {"trainer.accelerator"}, cuda_available=False)
    refuse_gpu_profile_without_cuda("16-mixed", files, {"trainer.precision"}, cuda_available=False)
    refuse_gpu_profile_without_cuda("16-mixed", files, set(), cuda_available=True)
    refuse_gpu_profile_without_cuda("32-true", ["configs/sac_cpu.yaml"], set(), cuda_available=False)
    with pytest.raises(AcceleratorUnavailable, match="sac_cpu.yaml"):  # the SAC profile's own precision
        refuse_gpu_profile_without_cuda("bf16-mixed", files, set(), cuda_available=False)
    with pytest.raises(AcceleratorUnavailable, match="--profile auto"):  # no CPU twin of this file: the auto profile
        refuse_gpu_profile_without_cuda("16-mixed", ["my_gpu.yaml"], set(), cuda_available=False)


def test_resuming_from_a_folder_without_checkpoints_is_an_error_naming_it(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "checkpoints"
    code = run_lightning_cli(
        ["fit", "--config", "configs/smoke.yaml", "--ckpt_path", "last", f"--checkpoint.dirpath={empty}"]
    )
    assert code == 2
    assert f"error: --ckpt_path last: no checkpoint in {empty}" in capsys.readouterr().err


def _short_fit(root: Path, *extra: str) -> int:
    """A 56-frame fit of the tiny site writing under ``root`` (``root/smoke``), no evaluation, no W&B, no images."""
    return run_lightning_cli(["fit", "--config", "configs/smoke.yaml", f"--trainer.logger.init_args.save_dir={root}",
                              "--model.init_args.rollout.frame_budget=56", "--model.init_args.rollout.eval_episodes=0",
                              "--tracking.wandb=false", "--report.plots=false", *extra])  # fmt: skip


def test_a_fresh_fit_on_a_run_with_checkpoints_is_refused_and_run_new_moves_the_earlier_run_aside(
    tmp_path: Path, capsys
) -> None:
    run, checkpoints = tmp_path / "smoke", tmp_path / "smoke" / "checkpoints"
    assert _short_fit(tmp_path) == 0
    first = sorted(path.name for path in checkpoints.iterdir())
    capsys.readouterr()

    assert _short_fit(tmp_path) == 2  # the same command again: refused, before anything is built or written
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert f"error: {checkpoints} already holds the checkpoints of an earlier run" in errors[0]
    assert (
        "--ckpt_path last" in errors[0] and f"--run.new (moves {run} aside to {tmp_path / 'smoke-old-1'}" in errors[0]
    )
    assert sorted(path.name for path in checkpoints.iterdir()) == first

    assert _short_fit(tmp_path, "--run.new") == 0  # a bare flag, as the error line writes it
    assert sorted(path.name for path in (tmp_path / "smoke-old-1" / "checkpoints").iterdir()) == first
    assert sorted(path.name for path in checkpoints.iterdir()) == first  # the new run's own, no "-v1" beside
    assert (checkpoints / "last.ckpt").resolve().parent == checkpoints.resolve()


def test_the_main_jobs_fit_on_a_fresh_clone_moves_nothing_quietly_and_run_again_moves_the_first_run_aside(
    tmp_path,
) -> None:
    """The main job's fit (``fit --config configs/smoke.yaml --run.new``, W&B offline as a user gets it) where there
    is no ``runs/`` at all: no earlier run, so nothing is said and no ``runs/smoke-old-1`` is made. (Building the
    W&B logger makes ``runs/smoke``; that folder was once taken for an earlier run at fit time and moved aside.)
    The same command again, with ``--verbose``, moves the first run aside.

    Both are real processes (W&B offline, the library noise as a user sees it in a pipe), so the same two runs also
    check the noise: the litlogger tip, the LeafSpec and W&B "anonymous" warnings are gone from the quiet run and
    there with ``--verbose`` (filtered at the source, not lost): one pair of processes for both checks, each
    start-up being ~10 s of imports."""
    command = [sys.executable, "-m", "iquitos_lightning", "fit", "--config", str(REPO / "configs" / "smoke.yaml"),
               "--run.new", f"--model.init_args.env.site={REPO / 'configs' / 'site' / 'tiny.yaml'}",
               f"--model.init_args.env.backend.data_root={REPO / 'data'}", "--model.init_args.rollout.frame_budget=56",
               "--model.init_args.rollout.eval_episodes=0"]  # fmt: skip
    environment = {**NO_CUDA, "WANDB_MODE": "offline", "PYTHONPATH": str(REPO)}  # this checkout's package

    def main_job_fit(*extra: str) -> tuple[str, str]:
        done = subprocess.run([*command, *extra], cwd=tmp_path, env=environment, capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout, done.stderr

    runs = tmp_path / "runs"
    stdout, stderr = main_job_fit()
    assert "--run.new" not in stderr
    assert sorted(path.name for path in runs.iterdir()) == ["smoke"]
    assert (runs / "smoke" / "checkpoints" / "last.ckpt").exists() and list((runs / "smoke" / "wandb").iterdir())
    quiet = stdout + stderr
    assert "installing [litlogger]" not in quiet and "LeafSpec" not in quiet and "anonymous setting" not in quiet
    assert "[torchrl][INFO]" in quiet and "\x1b[" not in quiet  # TorchRL's lines, without colour codes in a pipe

    stdout, stderr = main_job_fit("--verbose")
    assert "--run.new: the earlier run's runs/smoke is now runs/smoke-old-1" in stderr
    assert sorted(path.name for path in runs.iterdir()) == ["smoke", "smoke-old-1"]
    assert (runs / "smoke-old-1" / "checkpoints" / "last.ckpt").exists()
    assert (runs / "smoke" / "checkpoints" / "last.ckpt").exists() and list((runs / "smoke" / "wandb").iterdir())
    verbose = stdout + stderr
    assert "installing [litlogger]" in verbose  # filtered at the source, not lost
    assert "The anonymous setting has no effect" in verbose
    assert "VRAMMonitor measures" not in quiet + verbose  # on a CPU, nothing to explain


def test_run_new_takes_only_folders_holding_files_for_an_earlier_run(tmp_path: Path) -> None:
    run, checkpoints = tmp_path / "smoke", tmp_path / "smoke" / "checkpoints"
    assert claim_run_folder(checkpoints, run, new=True) == []  # no folder: no earlier run
    checkpoints.mkdir(parents=True)
    assert claim_run_folder(checkpoints, run, new=True) == []  # empty folders: used as they are, not moved
    (run / "version_0").mkdir()
    (run / "version_0" / "metrics.csv").write_text("step\n")
    assert claim_run_folder(checkpoints, run, new=True) == [run]
    outside = tmp_path / "elsewhere"  # a checkpoint folder outside the run folder is an earlier run's on its own
    outside.mkdir()
    (outside / "last.ckpt").write_bytes(b"")
    assert claim_run_folder(outside, run, new=True) == [run, outside]
    assert move_aside([run, outside]) == [(run, tmp_path / "smoke-old-1"), (outside, tmp_path / "elsewhere-old-1")]
    assert not run.exists() and (tmp_path / "smoke-old-1" / "version_0" / "metrics.csv").exists()


def test_a_fit_removes_the_kpi_row_of_an_earlier_test_from_the_run_folder(tmp_path: Path) -> None:
    stale = tmp_path / "smoke" / "kpis.json"
    stale.parent.mkdir()
    stale.write_text('{"controller": "SAC", "frames_trained": 1}')
    assert _short_fit(tmp_path) == 0
    assert not stale.exists()  # `test` writes it again for the weights trained now


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--model.init_args.batch_sze", "64"], "error: unknown option 'batch_sze': did you mean 'batch_size'?"),
        (["--config", "configs/no-such-profile.yaml"], "File does not exist"),
    ],
)
def test_a_bad_command_line_is_one_error_line_and_a_pointer_to_help(arguments, said, capsys) -> None:
    """One line: the error, and the pointer to ``--help`` on the same line where the error names no fix."""
    config = [] if "--config" in arguments else ["--config", "configs/smoke.yaml"]
    assert run_lightning_cli(["fit", *config, *arguments]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and lines[0].startswith("error:")
    assert ("--help" in lines[0]) == ("did you mean" not in said)


BLOCK_CITYLEARN = "import sys; sys.modules['citylearn'] = None\n"  # as if it were not installed


def test_the_site_without_citylearn_installed_says_how_to_install_it(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(BLOCK_CITYLEARN)
    command = [sys.executable, "-m", "iquitos_lightning", "fit", "--config", "configs/smoke.yaml",
               f"--trainer.logger.init_args.save_dir={tmp_path}"]  # fmt: skip
    environment = {**NO_CUDA, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "error: the Iquitos site needs CityLearn, which is not installed: pip install --no-deps" in done.stderr
    assert "Traceback" not in done.stderr
