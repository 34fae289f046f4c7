"""LightningCLI for the agents: ``python -m iquitos_lightning fit --config configs/sac_rtx4060.yaml``.

Why a subclass: the model is chosen in subclass mode (``--model SAC`` or ``class_path`` in YAML),
every value stays overridable on the command line and jsonargparse refuses unknown keys and wrong
types with its own message. On top of plain LightningCLI it adds what RL runs need:
- Trainer defaults for frame-budgeted training (no epoch limit, no sanity validation, log every
  rollout) and a CSVLogger under ``runs/<name>/`` (``trainer.logger``/``trainer.callbacks`` stay free);
- a ``checkpoint`` group (:class:`~iquitos_lightning.agents.checkpointing.FrameCheckpoint`: every N
  env frames plus ``last``; its folder defaults to ``<logger save_dir>/<name>/checkpoints`` so
  ``fit --ckpt_path last`` finds it from one run version to the next);
- GPU-only settings adapted to a CPU machine once (:mod:`iquitos_lightning.agents.devices`);
- ``profile: auto`` / ``--profile auto``: sizes, precision and buffer chosen for the device, explicit
  settings win (:mod:`iquitos_lightning.auto_profile`).
"""

from __future__ import annotations

import sys
from typing import Any

import torch
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.utilities import rank_zero_warn

from iquitos_lightning.agents import RLAgent
from iquitos_lightning.agents.checkpointing import FrameCheckpoint
from iquitos_lightning.agents.devices import AcceleratorUnavailable, adapt_to_machine
from iquitos_lightning.auto_profile import add_profile_argument, apply_profile
from iquitos_lightning.memory_budget import InsufficientMemory

DEFAULT_LOGGER = {
    "class_path": "lightning.pytorch.loggers.CSVLogger",
    "init_args": {"save_dir": "runs", "name": "agent"},
}


class IquitosLightningCLI(LightningCLI):
    def parse_arguments(self, parser: Any, args: Any) -> None:
        # Kept so the auto profile can tell what the user wrote from what is a default.
        self.written_args = list(sys.argv[1:] if args is None else args) if not isinstance(args, dict) else []
        super().parse_arguments(parser, args)

    def add_arguments_to_parser(self, parser: Any) -> None:
        add_profile_argument(parser)
        parser.add_lightning_class_args(FrameCheckpoint, "checkpoint")
        parser.set_defaults(
            {
                "trainer.max_epochs": -1,
                "trainer.num_sanity_val_steps": 0,
                "trainer.log_every_n_steps": 1,
                "trainer.logger": DEFAULT_LOGGER,
            }
        )

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        apply_profile(config, self.written_args)
        trainer = config.trainer
        adapted = adapt_to_machine(trainer.accelerator, trainer.precision, torch.cuda.is_available())
        trainer.accelerator = adapted.accelerator
        trainer.precision = adapted.precision
        if adapted.note:
            rank_zero_warn(adapted.note)
        if config.checkpoint.dirpath is None:
            root = _logger_root(trainer.logger)
            if root is not None:
                config.checkpoint.dirpath = f"{root}/checkpoints"


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
    saved_argv = sys.argv
    sys.argv = saved_argv[:1]  # LightningCLI reads `args`; a second copy in sys.argv only makes it warn
    try:
        IquitosLightningCLI(
            RLAgent,
            subclass_mode_model=True,
            args=args,
            seed_everything_default=0,
            save_config_kwargs={"overwrite": True},
            parser_kwargs={"prog": "python -m iquitos_lightning"},
        )
    except (AcceleratorUnavailable, InsufficientMemory) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        sys.argv = saved_argv
    return 0
