"""The LightningCLI entry: help, refusals of bad config, the smoke run on the tiny site, test-time KPI row."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import torch

from iquitos_lightning.__main__ import main
from iquitos_lightning.agents import RLAgent
from iquitos_lightning.cli import IquitosLightningCLI, one_line_parse_error, run_lightning_cli
from iquitos_lightning.profile.bases import profile_yaml

REPO = Path(__file__).resolve().parents[1]
SMOKE = str(REPO / "configs" / "smoke.yaml")


def _into(tmp_path: Path) -> list[str]:
    """Overrides that keep a run's logs and checkpoints in ``tmp_path``; its report without images (no test here
    reads them: tests/test_tracking_and_report.py does)."""
    return [
        "--trainer.logger.init_args.save_dir",
        str(tmp_path),
        "--checkpoint.dirpath",
        str(tmp_path / "smoke" / "checkpoints"),
        "--report.plots=false",
    ]


def test_help_works_through_the_module_entry_point(capsys):
    """``main`` is what ``python -m iquitos_lightning`` runs (the process itself is started by the robustness, tune
    and first-hour tests); here in this process, without a second ~10 s of imports."""
    assert main(["fit", "--help"]) == 0
    printed = capsys.readouterr().out
    assert "--model" in printed and "--checkpoint.every_n_frames" in printed


@pytest.mark.parametrize(
    ("override", "named"),
    [
        (["--model.init_args.no_such_setting", "1"], "no_such_setting"),
        (["--model.init_args.batch_size", "big"], "batch_size"),
    ],
)
def test_unknown_keys_and_wrong_types_are_refused_with_jsonargparse_message(override, named, capsys):
    code = run_lightning_cli(["fit", "--config", SMOKE, *override])
    assert code == 2
    assert named in capsys.readouterr().err


def test_model_is_chosen_by_name_and_every_value_is_overridable(capsys):
    code = run_lightning_cli(
        ["fit", "--model", "PPO", "--model.env.name", "Pendulum-v1", "--model.epochs", "3", "--print_config"]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert "class_path: iquitos_lightning.agents.PPO" in printed
    assert "epochs: 3" in printed and "name: Pendulum-v1" in printed


@pytest.mark.parametrize(
    ("override", "says"),
    [
        (["--model.init_args.env.forecasts", "bogus"], "env.forecasts must be one of ('past_days', 'oracle')"),
        (["--model.init_args.env.idle_band", "0.3"], "idle_band is for the self_consumption_window action layout"),
        (
            ["--model.init_args.env.backend.train", "twin", "--model.init_args.env.training.train_site_seeds", "[7]"],
            "training.train_site_seeds includes 7, the site's own year, the one evaluations report",
        ),
    ],
)
def test_a_bad_env_value_is_one_line_naming_it_not_a_trace(override, says, capsys, tmp_path):
    code = run_lightning_cli(["fit", "--config", SMOKE, *override, *_into(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"error: model.init_args.env: {says}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (["--config", SMOKE, "--model.init_args.gamma", "1.5"], "model.gamma must be in (0, 1], got 1.5"),
        (["--config", SMOKE, "--model.init_args.tau", "0"], "model.tau must be in (0, 1], got 0.0"),
        (["--config", SMOKE, "--model.init_args.critic_lr", "-0.001"], "model.critic_lr must be a learning rate >= 0"),
        (["--model", "PPO", "--model.env.name", "Pendulum-v1", "--model.gae_lambda", "1.2"], "model.gae_lambda must"),
        (["--config", SMOKE, "--model.init_args.updates_per_frame", "-1"], "model.updates_per_frame must be > 0"),
        (["--config", SMOKE, "--model.init_args.reward_scale", "0"], "model.reward_scale must be a factor > 0"),
        (["--config", SMOKE, "--model.init_args.target_entropy", "foo"], "model.target_entropy must be 'auto' or"),
        (["--config", SMOKE, "--model.init_args.alpha_init", "0"], "model.alpha_init must be an entropy weight > 0"),
    ],
)
def test_a_hyperparameter_out_of_range_is_refused_before_training(arguments, says, capsys, tmp_path):
    """A discount of 1.5, negative updates per frame or a reward scale of 0 used to train without a word; an entropy
    weight of 0 or an unknown target entropy ended in a jsonargparse traceback. A run that was not refused writes
    into ``tmp_path``, not the working directory."""
    keep_out = ["--trainer.default_root_dir", str(tmp_path), "--checkpoint.dirpath", str(tmp_path / "checkpoints")]
    code = run_lightning_cli(["fit", *arguments, "--trainer.logger", "false", *keep_out])
    err = capsys.readouterr().err
    assert code == 2
    assert f"error: {says}" in err


@pytest.mark.cpu_only
def test_gpu_accelerator_is_refused_on_a_cpu_machine(capsys):
    code = run_lightning_cli(["fit", "--config", SMOKE, "--trainer.accelerator", "gpu"])
    assert code == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_smoke_fit_on_the_tiny_site_then_test_writes_the_kpi_row(tmp_path, recwarn):
    """On the GPU where there is one (the config's accelerator is auto); on a CPU 16-mixed falls back, saying so.
    The checkpoint period is beyond the budget: the fit still ends with a checkpoint of all its frames (checked on
    this fit rather than on one more of its own)."""
    checkpoint_period = ["--checkpoint.every_n_frames", "100000"]
    code = run_lightning_cli(
        ["fit", "--config", SMOKE, *_into(tmp_path), "--trainer.precision", "16-mixed", *checkpoint_period]
    )
    assert code == 0
    fallbacks = [w for w in recwarn if "falls back to '32-true'" in str(w.message)]
    assert len(fallbacks) == (0 if torch.cuda.is_available() else 1)  # said once, and only where it happens
    checkpoints = tmp_path / "smoke" / "checkpoints"
    assert torch.load(checkpoints / "last.ckpt", weights_only=False)["rl_state"]["frames_done"] == 336
    metrics = (tmp_path / "smoke" / "version_0" / "metrics.csv").read_text()
    assert "val/episode_return" in metrics and "val/kpi/grid_import_kwh" in metrics

    code = run_lightning_cli(
        ["test", "--config", SMOKE, *_into(tmp_path), "--ckpt_path", str(checkpoints / "last.ckpt")]
    )
    assert code == 0
    row = json.loads((tmp_path / "smoke" / "kpis.json").read_text())
    assert row["controller"] == "SAC" and row["frames_trained"] == 336
    assert row["ev_departures"] > 0 and row["grid_import_kwh"] > 0
    assert abs(row["energy_balance_max_error_kw"]) < 1e-3


def test_a_bf16_mixed_fit_evaluates_in_full_precision(tmp_path):
    """bf16-mixed (the SAC GPU profiles' precision; typed here, so it also runs on a CPU) casts validation_step;
    the evaluation turns autocast off, as the collector runs, so the env gets float32 actions (bf16 ones crashed)."""
    code = run_lightning_cli(
        [
            "fit",
            "--config",
            SMOKE,
            *_into(tmp_path),
            "--trainer.precision",
            "bf16-mixed",
            "--trainer.accelerator",
            "cpu",
        ]
    )
    assert code == 0
    metrics = (tmp_path / "smoke" / "version_0" / "metrics.csv").read_text()
    assert "val/episode_return" in metrics and "val/kpi/grid_import_kwh" in metrics


def test_a_misspelled_option_of_a_given_class_is_matched_against_its_inherited_parameters():
    # PPO declares its own hyperparameters and passes the on-policy ones on as **kwargs
    message = "Problem with given class_path 'iquitos_lightning.agents.PPO': Option 'hiden_sizes' is not accepted"
    assert one_line_parse_error(message, []) == "unknown option 'hiden_sizes': did you mean 'hidden_sizes'?"


def test_top_level_help_lists_every_command_and_says_no_arguments_runs_the_main_job(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    printed = capsys.readouterr().out
    listed = {match.group(1) for match in re.finditer(r"^    (\S+)", printed, re.MULTILINE)}
    commands = {"fit", "validate", "test", "predict", "build-site", "baselines", "bench", "gpu-check", "compare"}
    commands |= {"tune", "tune-reference", "test-years", "benchmark"}
    assert listed == commands
    assert "With no command it runs the main job" in " ".join(printed.split())  # argparse wraps lines


def _short_fit(save_dir: Path, *extra: str) -> int:
    """A 56-frame fit of the tiny site logging under ``save_dir``, its checkpoint folder left to the run's name (as
    the profiles leave it); no evaluation, no W&B, no images."""
    return run_lightning_cli(["fit", "--config", SMOKE, f"--trainer.logger.init_args.save_dir={save_dir}",
                              "--model.init_args.rollout.frame_budget=56", "--model.init_args.rollout.eval_episodes=0",
                              "--tracking.wandb=false", "--report.plots=false", *extra])  # fmt: skip


def _files(folder: Path) -> dict[str, int]:
    return {path.name: path.stat().st_mtime_ns for path in folder.iterdir()}


def test_a_run_named_otherwise_trains_in_a_folder_of_its_own_and_a_rerun_is_refused_naming_that_folder(
    tmp_path, capsys
):
    """The issue: after a finished run, ``--trainer.logger.init_args.name bad`` moved the logs but not the
    checkpoints (the profile fixed ``checkpoint.dirpath``), so the fit was refused naming the first run's folder."""
    first = tmp_path / "smoke" / "checkpoints"
    assert _short_fit(tmp_path) == 0
    before = _files(first)
    for flag, name in (("--run.name", "other"), ("--trainer.logger.init_args.name", "other2")):
        assert _short_fit(tmp_path, flag, name) == 0
        assert (tmp_path / name / "checkpoints" / "last.ckpt").exists()
        assert (tmp_path / name / "version_0" / "metrics.csv").exists() and (tmp_path / name / "report").is_dir()
    assert _files(first) == before  # the first run's checkpoints untouched, nothing written beside them
    assert sorted(path.name for path in tmp_path.iterdir()) == ["other", "other2", "smoke"]

    capsys.readouterr()
    assert _short_fit(tmp_path, "--run.name", "other") == 2  # the same name again: refused, naming its folder
    error = capsys.readouterr().err
    other = tmp_path / "other"
    assert f"error: {other / 'checkpoints'} already holds the checkpoints of an earlier run" in error
    assert f"--run.new (moves {other} aside to {tmp_path / 'other-old-1'}; nothing is deleted)" in error
    assert f"--run.name NAME ({tmp_path}/NAME)" in error


class _Resolved(Exception):
    """Raised by :class:`_ResolveOnly` in place of building anything: carries the config the CLI resolved."""


class _ResolveOnly(IquitosLightningCLI):
    def instantiate_classes(self) -> None:
        raise _Resolved(self.config[self.subcommand])


def _resolved(*args: str):
    """The ``fit`` config once the CLI has derived the run's folders (refusals included), nothing built."""
    saved_argv, sys.argv = sys.argv, sys.argv[:1]  # as run_lightning_cli: pytest's own arguments are not the CLI's
    try:
        with pytest.raises(_Resolved) as resolved:
            _ResolveOnly(RLAgent, subclass_mode_model=True, args=["fit", *args], seed_everything_default=0)
    finally:
        sys.argv = saved_argv
    return resolved.value.args[0]


class _ParsersOnly(_ResolveOnly):
    def instantiate_classes(self) -> None:
        raise _Resolved(sorted(self._subcommand_parsers))


def test_a_command_builds_the_parser_of_its_subcommand_only_and_a_mistyped_one_lists_them_all(capsys, tmp_path):
    """Each subcommand's parser is built from the Trainer's and the model's signatures: a ``fit`` builds ``fit``'s
    alone; a command line that names none it knows still gets every one, so its error lists the choices. The run
    folder is a temporary one: the checkout's ``runs/smoke`` holds the README's main job once it has run there, and
    a fit on it is refused (an earlier run)."""
    saved_argv, sys.argv = sys.argv, sys.argv[:1]
    own_folder = f"--trainer.logger.init_args.save_dir={tmp_path}"
    try:
        for subcommand in ("fit", "test"):
            with pytest.raises(_Resolved) as built:
                _ParsersOnly(RLAgent, subclass_mode_model=True, args=[subcommand, "--config", SMOKE, own_folder])
            assert built.value.args[0] == [subcommand]
    finally:
        sys.argv = saved_argv
    assert run_lightning_cli(["fitt", "--config", SMOKE]) == 2
    assert "invalid choice: 'fitt' (choose from 'fit', 'validate', 'test', 'predict')" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--run.name", "--trainer.logger.init_args.name"])
def test_the_cards_profile_renamed_after_a_finished_run_puts_all_its_folders_under_the_new_name(
    flag, tmp_path, monkeypatch, capsys
):
    """``configs/sac_cpu.yaml`` as in the issue, resolved only (its fit takes minutes): the CSV log, the checkpoints,
    ``best.ckpt`` and the W&B logger all under ``<save_dir>/bad``; the same name again is refused naming its own
    folder."""
    monkeypatch.setenv("WANDB_MODE", "offline")  # the W&B logger is added to the config (not built here)
    earlier = tmp_path / "sac_cpu" / "checkpoints"
    earlier.mkdir(parents=True)
    (earlier / "last.ckpt").write_bytes(b"")
    profile = ["--config", "configs/sac_cpu.yaml", f"--trainer.logger.init_args.save_dir={tmp_path}"]
    config = _resolved(*profile, flag, "bad")
    assert config.checkpoint.dirpath == config.selection.dirpath == f"{tmp_path}/bad/checkpoints"
    csv, wandb = config.trainer.logger
    assert (csv.init_args.save_dir, csv.init_args.name) == (str(tmp_path), "bad")
    assert (wandb.init_args.save_dir, wandb.init_args.name) == (f"{tmp_path}/bad", "bad")

    assert run_lightning_cli(["fit", *profile]) == 2
    error = capsys.readouterr().err
    assert f"error: {earlier} already holds the checkpoints of an earlier run (last.ckpt)" in error
    assert f"--run.new (moves {tmp_path / 'sac_cpu'} aside to {tmp_path / 'sac_cpu-old-1'}" in error


def test_run_name_takes_a_config_files_checkpoint_folder_along_but_not_a_typed_one(tmp_path):
    """A tuned config (``tune`` writes ``checkpoint.dirpath: runs/<name>/checkpoints``) or an older copy of a profile
    fixes the folder at its name's: ``--run.name`` moves it along; ``--checkpoint.dirpath`` typed stays put."""
    old = f"{tmp_path}/old/checkpoints"
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(f"checkpoint: {{dirpath: {old}}}\nselection: {{dirpath: {old}}}\n")
    both = ["--config", SMOKE, "--config", str(fixed), f"--trainer.logger.init_args.save_dir={tmp_path}"]
    both += ["--trainer.logger.init_args.name=old", "--tracking.wandb=false", "--run.name", "new"]
    config = _resolved(*both)
    assert config.checkpoint.dirpath == config.selection.dirpath == f"{tmp_path}/new/checkpoints"
    assert _resolved(*both, f"--checkpoint.dirpath={old}").checkpoint.dirpath == old


def test_run_name_without_a_logger_is_refused_saying_what_to_set(capsys):
    assert run_lightning_cli(["fit", "--config", SMOKE, "--trainer.logger", "false", "--run.name", "bad"]) == 2
    assert "error: --run.name bad: a run is named through its logger" in capsys.readouterr().err


def test_no_profile_fixes_its_checkpoint_folder_apart_from_the_runs_name():
    """Every profile leaves ``checkpoint.dirpath`` to be derived from its logger's name, so that ``--run.name``
    moves the whole run (``configs/tuned/``: written by ``tune``; ``--run.name`` takes their folder along)."""
    fixed = []
    for path in sorted(path for path in (REPO / "configs").rglob("*.yaml") if "site" not in path.parts):
        config = profile_yaml(path)  # over its base: a base that fixed the folder would fix every profile's
        checkpoint = config.get("checkpoint") if isinstance(config, dict) else None
        if "tuned" not in path.parts and isinstance(checkpoint, dict) and "dirpath" in checkpoint:
            fixed.append(path.relative_to(REPO).as_posix())
    assert fixed == []


@pytest.mark.parametrize(("tty", "bar"), [("1", "RLProgressBar"), ("0", "LineProgressBar")])
def test_the_progress_bar_is_rich_on_a_terminal_and_lines_elsewhere(tty, bar, tmp_path, monkeypatch):
    """Rich draws its bar only on a terminal; elsewhere (a log file) the run prints plain lines. Which one is rich's
    own test of stdout (``TTY_COMPATIBLE`` overrides it, as for rich itself)."""
    monkeypatch.setenv("TTY_COMPATIBLE", tty)
    config = _resolved("--config", SMOKE, "--trainer.enable_progress_bar=true",
                       f"--trainer.logger.init_args.save_dir={tmp_path}")  # fmt: skip
    bars = [entry.class_path for entry in config.trainer.callbacks if "ProgressBar" in entry.class_path]
    assert bars == [f"iquitos_lightning.training.callbacks.{bar}"]
