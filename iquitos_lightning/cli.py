"""LightningCLI for the agents: ``python -m iquitos_lightning fit --config configs/sac_rtx4060.yaml``.

Why a subclass: the model is chosen in subclass mode (``--model SAC`` or ``class_path`` in YAML),
every value stays overridable on the command line and jsonargparse refuses unknown keys and wrong
types with its own message. On top of plain LightningCLI it adds what RL runs need:
- Trainer defaults for frame-budgeted training (no epoch limit, no sanity validation, log every
  rollout) and a CSVLogger under ``runs/<name>/`` (``trainer.logger``/``trainer.callbacks`` stay free);
- a ``checkpoint`` group (:class:`~iquitos_lightning.training.callbacks.frame_checkpoint.FrameCheckpoint`: every N
  env frames plus ``last``; its folder defaults to ``<logger save_dir>/<name>/checkpoints`` so
  ``fit --ckpt_path last`` finds it from one run version to the next) and a ``selection`` group
  (:class:`~iquitos_lightning.training.callbacks.best_checkpoint.BestCheckpoint`: ``best.ckpt`` beside them, the
  best evaluation on the selection year when ``env.validation_site_seed`` is set);
- GPU-only settings adapted to a CPU machine once (:mod:`iquitos_lightning.profile.devices`);
- the evaluation of the policy (:class:`~iquitos_lightning.training.callbacks.PolicyEvaluation`: ``val/*``,
  ``select/*``, ``test/*``), added to every command unless ``trainer.callbacks`` names one;
- the observing callbacks, each a configurable group (``--step_rate.*``, ``--vram.*``, ``--oom.*``,
  ``--report.*``, ``--health.*``) and the frames-counting rich progress bar whenever the progress bar is on (off a
  terminal, where rich draws nothing until the end, plain progress and evaluation lines instead:
  :mod:`iquitos_lightning.training.callbacks.progress_lines`);
- tracking (:mod:`iquitos_lightning.training.tracking`): beside the CSV log, a W&B run in offline mode by
  default (``WANDB_MODE=online`` opts in, ``disabled`` or ``--tracking.wandb false`` opts out) that
  receives the full resolved config;
- a CUDA out-of-memory error ends the process with status 3 after the emergency checkpoint.
- crash-safe checkpoint files (:class:`~iquitos_lightning.training.checkpoint_io.SafeCheckpointIO` is the
  default ``trainer.plugins``) and one-line errors: a :class:`~iquitos_lightning.errors.ProjectError`
  anywhere in the chain is printed as ``error: ...`` with its exit status, never as a traceback;
  a run stopped by Ctrl-C exits with 130 after its checkpoint is saved;
- an explicit ``--ckpt_path`` is checked before anything is built, and its hyperparameters never
  replace the command line's (:mod:`iquitos_lightning.fastpath.cli_checkpoint`).
- one name per run: ``--run.name NAME`` names the logger(s), and the run's logs, checkpoints (derived from
  ``<save_dir>/<name>``: the profiles set no ``checkpoint.dirpath``) and report go to ``<save_dir>/NAME``;
- one run per folder: a ``fit`` without ``--ckpt_path`` on a checkpoint folder that holds checkpoints is
  refused unless ``--run.new`` moves the earlier run aside (:mod:`iquitos_lightning.training.run_folder`);
- ``profile: auto`` / ``--profile auto``: sizes, precision and buffer chosen for the device, explicit
  settings win (:mod:`iquitos_lightning.profile.auto_profile`);
- ``final_test.backend: citylearn``: a ``fit`` that reached its budget ends with a test of the final policy on
  CityLearn itself (:mod:`iquitos_lightning.training.final_evaluation`): the card's profiles train on the twin;
  ``final_test.policy: best`` tests ``best.ckpt`` instead.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

import torch
import yaml
from jsonargparse import Namespace
from jsonargparse.typing import import_object
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI, SaveConfigCallback
from lightning.pytorch.utilities import rank_zero_warn
from lightning.pytorch.utilities.exceptions import SIGTERMException

from iquitos_lightning.agents import A2C, PPO, SAC, RLAgent
from iquitos_lightning.agents.resume import describe_identity
from iquitos_lightning.envs.moved_keys import where_it_lives_now, where_its_value_lives_now
from iquitos_lightning.errors import (
    INTERRUPTED_EXIT_CODE,
    TERMINATED_EXIT_CODE,
    ConfigError,
    find_in_chain,
    find_project_error,
    one_line,
)
from iquitos_lightning.fastpath.cli_checkpoint import CommandLineWinsOnResume
from iquitos_lightning.fastpath.parser_options import option_names
from iquitos_lightning.profile.auto_profile import add_profile_argument, apply_profile
from iquitos_lightning.profile.bases import names_a_base, profile_yaml
from iquitos_lightning.profile.devices import AcceleratorUnavailable, adapt_to_machine, refuse_gpu_profile_without_cuda
from iquitos_lightning.profile.explicit_settings import command_line_keys, config_files
from iquitos_lightning.profile.hardware import apply_memory_cap
from iquitos_lightning.profile.memory_budget import InsufficientMemory
from iquitos_lightning.training.callbacks import (
    BestCheckpoint,
    FrameCheckpoint,
    LearningHealth,
    OutOfMemoryHandler,
    RunReport,
    StepRate,
    VRAMMonitor,
    exit_on_out_of_memory,
    interrupt,
)
from iquitos_lightning.training.callbacks.progress_lines import draws_a_bar
from iquitos_lightning.training.checkpoint_io import SafeCheckpointIO
from iquitos_lightning.training.final_evaluation import (
    FinalTest,
    print_test_figures,
    refuse_best_without_selection,
    run_final_test,
)
from iquitos_lightning.training.quiet import quiet_library_noise
from iquitos_lightning.training.run_folder import RunOptions, claim_run_folder, move_aside
from iquitos_lightning.training.tracking import TrackingConfig, resolve_wandb_mode, wandb_loggers

DEFAULT_LOGGER = {
    "class_path": "lightning.pytorch.loggers.CSVLogger",
    "init_args": {"save_dir": "runs", "name": "agent"},
}
SAFE_CHECKPOINT_IO = {"class_path": "iquitos_lightning.training.checkpoint_io.SafeCheckpointIO"}

# The classes ``--model=<name>`` chooses from: jsonargparse finds a short name among RLAgent's subclasses imported so
# far, and the agents package imports them on first use only (agents/__init__.py), so the CLI imports them itself.
AGENT_CLASSES = (A2C, PPO, SAC)


UNKNOWN_OPTION = re.compile(r"Option '([^']+)' is not accepted")
GIVEN_CLASS = re.compile(r"Problem with given class_path '([^']+)'")
BAD_TYPE = re.compile(r'^Parser key "([^"]+)":')
EXPECTED_TYPES = re.compile(r"<class '(\w+)'>")
GIVEN_VALUE = re.compile(r"(?:Got value|Given value): (.*)$", re.MULTILINE)
MAX_VALUE_SHOWN = 80
ALL_OPTIONS = "(all options: python -m iquitos_lightning <command> --help)"


def one_line_parse_error(message: str, known_options: list[str]) -> str:
    """jsonargparse's message condensed to one line that names the fix: an unknown option's new place when it moved
    (envs/moved_keys.py) or a close match; a value of the wrong type with the types allowed; else its first line.
    Where the line names no fix it ends with the pointer to ``--help``.

    Why: a misspelled ``--model.init_args.batch_sze`` came back as usage plus a 10-line dump of the Union of
    model classes, a moved ``env.num_envs`` as "did you mean 'num_envs'?" and ``backend.num_envs abc`` as
    ``Parser key "backend.num_envs":`` alone. ``known_options`` are the option names of the parser that refused it
    (or of the model class its message names).
    """
    unknown = UNKNOWN_OPTION.search(message)
    if unknown is None:
        return wrong_value_line(message) or f"{message.strip().splitlines()[0]} {ALL_OPTIONS}"
    option = unknown.group(1)
    moved = where_it_lives_now(option, known_options)
    if moved is not None:
        return f"unknown option {option!r}: {moved}"
    given = GIVEN_CLASS.search(message)
    if given:
        try:
            known_options = class_options(given.group(1))
        except (ImportError, AttributeError, ValueError):
            pass
    close = difflib.get_close_matches(option, known_options, n=1)
    return f"unknown option {option!r}" + (f": did you mean {close[0]!r}?" if close else f" {ALL_OPTIONS}")


def wrong_value_line(message: str) -> str | None:
    """One line for jsonargparse's ``Parser key "backend.num_envs":`` and the lines below it: a value of the wrong
    type with the types allowed (``backend.num_envs must be int, got 'abc'``), or a value given to a group that held
    one before (``backend: twin``, envs/moved_keys.py); None for another message, or a value too long for a line
    (a whole group's namespace)."""
    key = BAD_TYPE.match(message.strip())
    if key is None:
        return None
    moved = where_its_value_lives_now(key.group(1))
    if moved is not None:
        return f"{key.group(1)} is a group now: {moved}"
    expected = message.partition("Given value type")[0]  # the types allowed, not the one given
    value = GIVEN_VALUE.search(message)
    types = [name.replace("NoneType", "null") for name in EXPECTED_TYPES.findall(expected)]
    if value is None or not types or len(value.group(1)) > MAX_VALUE_SHOWN:
        return None
    return f"{key.group(1)} must be {' or '.join(dict.fromkeys(types))}, got {value.group(1).strip()!r}"


def class_options(class_path: str) -> list[str]:
    """The option names of a class's constructor as jsonargparse sees them: PPO's and A2C's ``**kwargs`` resolved
    into the on-policy layer's parameters, which ``inspect.signature`` would not show."""
    parser = LightningArgumentParser()
    parser.add_class_arguments(import_object(class_path))
    return option_names(parser)


class ProfileParser(LightningArgumentParser):
    """A ``--config`` file that names a ``base`` is read over its base (:mod:`iquitos_lightning.profile.bases`).

    Why here: every config file jsonargparse reads goes through :meth:`parse_path`, so the card's overlays
    (``configs/sac_cpu.yaml`` over ``configs/base/sac.yaml``) parse, print (``--print_config``) and save (a run's
    ``config.yaml``) as the whole config they stand for. A file without ``base`` is read by jsonargparse as it is.
    """

    def parse_path(self, path: Any, ext_vars: dict | None = None, env: bool | None = None, defaults: bool = True,
                   **kwargs: Any) -> Namespace:  # fmt: skip
        if not names_a_base(path):
            return super().parse_path(path, ext_vars, env, defaults, **kwargs)
        resolved = yaml.safe_dump(profile_yaml(path), sort_keys=False)
        return self.parse_string(resolved, Path(str(path)).name, ext_vars, env, defaults, **kwargs)


class OneLineErrorParser(ProfileParser):
    """A parse error is one ``error:`` line naming the fix (or pointing to ``--help``), not the usage and a Union
    dump."""

    def error(self, message: str, ex: Exception | None = None) -> NoReturn:
        parser = getattr(ex, "subcommand_parser", None) or self
        known = option_names(parser)
        sys.stderr.write(f"error: {one_line_parse_error(message, known)}\n")
        raise SystemExit(2)


class IquitosLightningCLI(CommandLineWinsOnResume):
    _earlier_run: tuple[Path, ...] = ()  # --run.new: the folders an earlier run left, found before building

    def __init__(self, *args: Any, parser_class: type[LightningArgumentParser] = ProfileParser, **kwargs: Any) -> None:
        given = kwargs.get("args")
        first = given[0] if isinstance(given, list) and given else None
        self._only_subcommand = first if first in LightningCLI.subcommands() else None
        super().__init__(*args, parser_class=parser_class, **kwargs)  # a profile's base is read however it is built

    def subcommands(self) -> dict[str, set[str]]:  # type: ignore[override]
        """Lightning's subcommands, or only the one the command line names. Why: each subcommand's parser is built
        from the Trainer's and the model's signatures, and a run parses one: a ``fit`` builds one parser instead of
        four (~0.2 s less CPU at every start; measured here, docs/experiments.md, "suite time, measured and cut").
        Without a subcommand first (``--help`` alone, a typo) every one is built, so the error lists them all."""
        every = LightningCLI.subcommands()
        chosen = self._only_subcommand
        return {chosen: every[chosen]} if chosen else every

    def parse_arguments(self, parser: Any, args: Any) -> None:
        # Kept so the auto profile can tell what the user wrote from what is a default.
        self.written_args = list(sys.argv[1:] if args is None else args) if not isinstance(args, dict) else []
        super().parse_arguments(parser, args)

    def add_arguments_to_parser(self, parser: Any) -> None:
        add_profile_argument(parser)
        parser.add_lightning_class_args(FrameCheckpoint, "checkpoint")
        parser.add_lightning_class_args(BestCheckpoint, "selection")
        parser.add_lightning_class_args(StepRate, "step_rate")
        parser.add_lightning_class_args(VRAMMonitor, "vram")
        parser.add_lightning_class_args(OutOfMemoryHandler, "oom")
        parser.add_lightning_class_args(RunReport, "report")
        parser.add_lightning_class_args(LearningHealth, "health")
        parser.add_class_arguments(TrackingConfig, "tracking")
        parser.add_class_arguments(RunOptions, "run")
        parser.add_class_arguments(FinalTest, "final_test")
        parser.set_defaults(
            {
                "trainer.max_epochs": -1,
                "trainer.num_sanity_val_steps": 0,
                "trainer.log_every_n_steps": 1,
                "trainer.logger": DEFAULT_LOGGER,
                "trainer.plugins": [SAFE_CHECKPOINT_IO],
            }
        )

    def check_checkpoint_file(self, ckpt_path: str, model: Any) -> None:
        """Refuse a ``--ckpt_path`` file of another agent or env, naming both (before anything is built)."""
        saved = SafeCheckpointIO().load_checkpoint(ckpt_path).get("rl_state", {}).get("identity")
        agent = str(getattr(model, "class_path", "")).rsplit(".", 1)[-1]
        env = getattr(getattr(model, "init_args", None), "env", None)
        env_name = getattr(env, "name", None) if env is not None else None
        if saved is None or (saved["agent"] == agent and (env_name is None or saved["env"] == env_name)):
            return
        raise ConfigError(
            f"--ckpt_path {ckpt_path}: the checkpoint is of {describe_identity(saved)}; this run is {agent} on "
            f"{env_name}: use a checkpoint of the same agent and env (--model, --model.env.name), or start without "
            "--ckpt_path"
        )

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        name_run(config, command_line_keys(self.written_args))  # first: the run's folders are derived from its name
        apply_profile(config, self.written_args)
        trainer = config.trainer
        refuse_gpu_profile_without_cuda(
            trainer.precision,
            config_files(self.written_args),
            command_line_keys(self.written_args),
            torch.cuda.is_available(),
            config.get("model"),
        )
        typed = "trainer.precision" in command_line_keys(self.written_args)
        cuda = torch.cuda.is_available()
        capability = torch.cuda.get_device_capability() if cuda else None
        adapted = adapt_to_machine(trainer.accelerator, trainer.precision, cuda, typed, capability)
        trainer.accelerator = adapted.accelerator
        trainer.precision = adapted.precision
        if adapted.note:
            rank_zero_warn(adapted.note)
        if config.checkpoint.dirpath is None:
            root = _logger_root(trainer.logger)
            if root is not None:
                config.checkpoint.dirpath = f"{root}/checkpoints"
        if config.selection.dirpath is None:
            config.selection.dirpath = config.checkpoint.dirpath  # best.ckpt beside the run's other checkpoints
        if config.get("ckpt_path") == "last" and config.checkpoint.dirpath:
            folder = Path(str(config.checkpoint.dirpath))
            if not any(folder.glob("*.ckpt")):
                raise ConfigError(
                    f"--ckpt_path last: no checkpoint in {folder} to resume; start without --ckpt_path, or point "
                    "--checkpoint.dirpath at the run's checkpoint folder"
                )
        if self.subcommand == "fit":
            refuse_best_without_selection(config.final_test, config.get("model"))
            # Refused now, before anything is built; with --run.new, what is an earlier run is also decided now:
            # building the loggers makes the run folder (W&B's save_dir), which is no earlier run.
            self._earlier_run = self._claim_run_folder(config)
        if not _has_callback(trainer.callbacks, "PolicyEvaluation"):  # what plays and logs val/, select/, test/
            trainer.callbacks = [*(trainer.callbacks or []), Namespace(class_path=EVALUATION, init_args=Namespace())]
        if trainer.enable_progress_bar is not False and not _has_callback(trainer.callbacks, "ProgressBar"):
            bar = PROGRESS_BAR if draws_a_bar() else LINE_PROGRESS_BAR  # off a terminal: lines a log file keeps
            trainer.callbacks = [*(trainer.callbacks or []), Namespace(class_path=bar, init_args=Namespace())]
        if trainer.enable_model_summary is not False and not _has_callback(trainer.callbacks, "Summary"):
            trainer.callbacks = [*(trainer.callbacks or []), Namespace(class_path=SUMMARY, init_args=Namespace())]
        if config.tracking.wandb and resolve_wandb_mode() != "disabled":
            trainer.logger = _with_wandb_logger(trainer.logger, config.tracking.project)

    def before_fit(self) -> None:
        """``--run.new``: the earlier run's folders (found before anything was built) move aside only now, once
        every class is built (a config error never moves a run for nothing); without it the refusal came before
        anything was built. On a first run there is nothing to move and nothing is said."""
        for moved, aside in move_aside(list(self._earlier_run)):
            print(f"--run.new: the earlier run's {moved} is now {aside}", file=sys.stderr)
        root = _logger_root(self.config[self.subcommand].trainer.logger)
        if self._earlier_run and root:
            Path(root).mkdir(parents=True, exist_ok=True)  # the W&B logger was given it when it was built

    def after_fit(self) -> None:
        """``final_test.backend``: a fit that reached its budget ends with a test on that simulator."""
        final_test = self.config[self.subcommand].final_test
        if final_test.backend is not None and not interrupt_requested():
            run_final_test(self.trainer, self.model, final_test.backend, final_test.policy)

    def after_test(self) -> None:
        """``test`` prints the bill and the gap on the year it tested, as the final test of a ``fit`` does."""
        print_test_figures(self.trainer, self.model)

    def _claim_run_folder(self, config: Any) -> tuple[Path, ...]:
        """A fresh ``fit`` (no ``--ckpt_path``) never writes beside an earlier run's checkpoints (run_folder.py):
        refused without ``--run.new``; with it, the folders of the earlier run, to move in :meth:`before_fit`."""
        if config.get("ckpt_path") is not None or not config.checkpoint.dirpath:
            return ()
        root = _logger_root(config.trainer.logger)
        run_root = Path(root) if root else None
        checkpoint_dir = Path(str(config.checkpoint.dirpath))
        follows_name = _follows_name(checkpoint_dir, root, "checkpoint", command_line_keys(self.written_args))
        return tuple(claim_run_folder(checkpoint_dir, run_root, new=config.run.new, follows_name=follows_name))


class ConfigToWandb(SaveConfigCallback):
    """Writes ``config.yaml`` beside the logs (Lightning's behaviour) and gives W&B the full resolved config."""

    def save_config(self, trainer: Any, pl_module: Any, stage: str) -> None:
        loggers = wandb_loggers(trainer.loggers)
        if loggers:
            resolved = self.parser.dump(self.config, skip_none=False, format="yaml")
            for logger in loggers:
                logger.experiment.config.update({"cli": yaml.safe_load(resolved)}, allow_val_change=True)


EVALUATION = "iquitos_lightning.training.callbacks.PolicyEvaluation"
PROGRESS_BAR = "iquitos_lightning.training.callbacks.RLProgressBar"
LINE_PROGRESS_BAR = "iquitos_lightning.training.callbacks.LineProgressBar"
SUMMARY = "iquitos_lightning.training.callbacks.ParameterSummary"


def _has_callback(callbacks: Any, kind: str) -> bool:
    """Whether the configured callbacks hold one whose class name contains ``kind`` ("ProgressBar", "Summary",
    "PolicyEvaluation")."""
    entries = callbacks if isinstance(callbacks, list) else [] if callbacks is None else [callbacks]
    return any(kind in str(getattr(entry, "class_path", type(entry).__name__)) for entry in entries)


def _with_wandb_logger(logger: Any, project: str) -> Any:
    """The configured logger(s) plus an offline-first W&B logger writing under the same ``runs/<name>`` folder.

    Nothing is added when logging is off (``logger: false``) or a W&B logger is already configured.
    """
    if logger is False or logger is None:
        return logger
    loggers = list(logger) if isinstance(logger, list) else [logger]
    if any("Wandb" in str(getattr(entry, "class_path", "")) for entry in loggers):
        return logger
    root = _logger_root(loggers) or "runs/agent"
    name = root.rstrip("/").split("/")[-1]
    wandb = Namespace(
        class_path="iquitos_lightning.training.tracking.OfflineFirstWandbLogger",
        init_args=Namespace(name=name, save_dir=root, project=project),
    )
    return [*loggers, wandb]


def name_run(config: Any, typed: set[str]) -> None:
    """``--run.name NAME``: every configured logger that has a name (the CSV log, a W&B logger) is named NAME, so the
    run's folder, ``<save_dir>/NAME``, holds its logs, its checkpoints and its report.

    Why: the profiles named the run in the logger and fixed ``checkpoint.dirpath: runs/<profile>/checkpoints``
    beside it; ``--trainer.logger.init_args.name bad`` then logged to ``runs/bad`` and checkpointed into the
    profile's folder, where a finished run's checkpoints made the fit refuse. The profiles now leave the checkpoint
    folder to be derived from the name; a config file that still fixes it at the earlier name's
    ``<save_dir>/<name>/checkpoints`` (a tuned config, an older copy of a profile) has it follow the new name too.
    A folder typed on the command line (``--checkpoint.dirpath``) stays where it was put. ``typed``: the keys
    given on the command line (:func:`~iquitos_lightning.profile.explicit_settings.command_line_keys`).
    """
    name = config.run.name
    if not name:
        return
    logger = config.trainer.logger
    named = [entry for entry in (logger if isinstance(logger, list) else [logger]) if _has_name(entry)]
    if not named:
        why = "logging is off (trainer.logger false)" if not logger else "the configured logger takes no name"
        raise ConfigError(
            f"--run.name {name}: a run is named through its logger (its folder is <save_dir>/{name}) and {why}: "
            "keep a logger (the default CSVLogger), or drop --run.name and set --checkpoint.dirpath"
        )
    earlier = _logger_root(logger)
    for entry in named:
        entry.init_args.name = name
    for group in ("checkpoint", "selection"):
        dirpath = getattr(config, group).dirpath
        if dirpath and _follows_name(Path(str(dirpath)), earlier, group, typed):
            getattr(config, group).dirpath = None  # derived again from the new name (before_instantiate_classes)


def _has_name(logger: Any) -> bool:
    init_args = getattr(logger, "init_args", None)
    return isinstance(init_args, Namespace) and "name" in init_args


def _follows_name(folder: Path, root: str | None, group: str, typed: set[str]) -> bool:
    """Whether ``folder`` (``<group>.dirpath``) is the run folder's ``checkpoints``, set by the config, not typed."""
    return root is not None and f"{group}.dirpath" not in typed and folder == Path(root) / "checkpoints"


def _logger_root(logger: Any) -> str | None:
    """``<save_dir>/<name>`` of the first logger that has both, else None."""
    loggers = logger if isinstance(logger, list) else [logger]
    for entry in loggers:
        init_args = getattr(entry, "init_args", None)
        save_dir = getattr(init_args, "save_dir", None)
        name = getattr(init_args, "name", None)
        if save_dir and name:
            return f"{save_dir}/{name}"
    return None


def run_lightning_cli(args: list[str]) -> int:
    """Run ``fit``/``validate``/``test``/``predict`` with ``args``; returns the process exit code."""
    verbose = "--verbose" in args
    args = _bare_flags_valued([arg for arg in args if arg != "--verbose"])
    quiet_library_noise(verbose)  # the litlogger tip and LeafSpec warning; --verbose keeps them
    apply_memory_cap()  # IQUITOS_GPU_MEMORY_CAP_GIB: a large GPU run as a smaller card (hardware.py)
    saved_argv = sys.argv
    sys.argv = saved_argv[:1]  # LightningCLI reads `args`; a second copy in sys.argv only makes it warn
    interrupt.forget()
    try:
        with exit_on_out_of_memory():
            IquitosLightningCLI(
                RLAgent,
                subclass_mode_model=True,
                args=args,
                seed_everything_default=0,
                save_config_callback=ConfigToWandb,
                save_config_kwargs={"overwrite": True},
                parser_kwargs={"prog": "python -m iquitos_lightning"},
                parser_class=OneLineErrorParser,
            )
    except (AcceleratorUnavailable, InsufficientMemory) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except SIGTERMException:  # Lightning stops after the batch in progress; FrameCheckpoint has saved
        return _interrupted_exit_code() or _say_stopped("terminated (SIGTERM)", None)
    except SystemExit as exit_:  # Lightning exits with 1 on a second Ctrl-C (after saving)
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        return _interrupted_exit_code() or code
    except KeyboardInterrupt:
        print("interrupted before training started: nothing to save", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    except Exception as error:
        if raised_while_interrupting(error):  # a second Ctrl-C that a library's cleanup turned into another error
            return _interrupted_exit_code() or INTERRUPTED_EXIT_CODE
        project_error = find_project_error(error)
        if project_error is None:
            raise
        print(f"error: {one_line(project_error)}", file=sys.stderr)
        return project_error.exit_code
    finally:
        sys.argv = saved_argv
        _finish_wandb_run()
    return _interrupted_exit_code()


BARE_FLAGS = ("--run.new",)


def _bare_flags_valued(args: list[str]) -> list[str]:
    """``--run.new`` alone means ``--run.new=true`` (jsonargparse wants a value after a bool option)."""
    valued = []
    for index, arg in enumerate(args):
        following = args[index + 1].lower() if index + 1 < len(args) else ""
        bare = arg in BARE_FLAGS and following not in ("true", "false")
        valued.append(f"{arg}=true" if bare else arg)
    return valued


def _finish_wandb_run() -> None:
    """Close the W&B run of this command so its records are complete on disk (a later command starts a new run)."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish()


def raised_while_interrupting(error: BaseException) -> bool:
    """Whether ``error`` arose while a ``KeyboardInterrupt`` unwound (it is in the exception's context chain).

    Why: a second Ctrl-C raises ``KeyboardInterrupt`` wherever the code is; inside TorchRL's SAC loss (its vmap
    over the Q networks swaps parameters in a context manager) the cleanup then failed with ``RuntimeError:
    Converting a tensordict to boolean value is not permitted``, and the run ended with a traceback and status 1
    although the user had asked to stop and the checkpoint was saved. Such a run is an interrupted one (130).
    """
    return find_in_chain(error, KeyboardInterrupt) is not None


def interrupt_requested() -> bool:
    """True once Ctrl-C or SIGTERM asked this run to stop."""
    request = interrupt.last_request()
    return request is not None and request.requested


def _interrupted_exit_code() -> int:
    """130 (Ctrl-C) or 143 (SIGTERM), after saying where the checkpoint is, when the run was stopped; else 0."""
    if not interrupt_requested():
        return 0
    request = interrupt.last_request()
    how = "terminated (SIGTERM)" if request.terminated else "interrupted"
    return _say_stopped(how, request, TERMINATED_EXIT_CODE if request.terminated else INTERRUPTED_EXIT_CODE)


def _say_stopped(how: str, request: interrupt.InterruptRequest | None, code: int = TERMINATED_EXIT_CODE) -> int:
    """The one line of a stopped run: where its checkpoint is and how to resume; returns ``code``."""
    if request is not None and request.saved_to:
        where = f"checkpoint saved to {request.saved_to}"
    elif request is not None and request.up_to_date:
        where = f"the last checkpoint, {request.up_to_date}, was already up to date"
    elif request is not None:
        where = "the last checkpoint was already up to date"
    else:
        print(f"{how} before training started: nothing to save", file=sys.stderr)
        return code
    print(f"{how}: {where}; resume with the same command and --ckpt_path last", file=sys.stderr)
    return code
