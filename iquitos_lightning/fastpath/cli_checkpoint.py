"""LightningCLI whose command line and config define a resumed run, not the checkpoint's hyperparameters.

What it overrides: ``LightningCLI._parse_ckpt_path`` (Lightning 2.6), which merges the hyperparameters saved in a
``--ckpt_path`` file into the parsed config before the classes are built. For these agents that is wrong twice
over: a checkpoint of another agent fails deep inside jsonargparse, and one of another env silently switches
the run to that env; and ``--ckpt_path last --model.init_args.rollout.frame_budget N`` must be able to train an
ended run further. Here, when the config names a model, the checkpoint file is only checked
(:meth:`CommandLineWinsOnResume.check_checkpoint_file`, the subclass's refusal) and nothing is merged; without
a model in the config Lightning's own merge runs (the checkpoint then defines the model).

Checked at import: ``LightningCLI`` still has ``_parse_ckpt_path``. Tested by ``tests/test_cli.py`` (a resumed
run keeps the command line's values) and ``tests/robustness/test_bad_input.py`` (another agent's checkpoint is
refused by name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch.cli import LightningCLI

from iquitos_lightning.fastpath.pins import require

require(LightningCLI, ["_parse_ckpt_path"], library="lightning", override=__name__)


class CommandLineWinsOnResume(LightningCLI):
    """``LightningCLI`` that checks a ``--ckpt_path`` file instead of merging its hyperparameters (module docstring)."""

    def check_checkpoint_file(self, ckpt_path: str, model: Any) -> None:
        """Refuse a checkpoint that does not fit the configured ``model`` (a subclass says how); here: accept."""

    def _parse_ckpt_path(self) -> None:
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if not ckpt_path or not Path(ckpt_path).is_file():
            return
        model = self.config[subcommand].get("model")
        if model is None or not getattr(model, "class_path", None):
            super()._parse_ckpt_path()  # no model in the config: the checkpoint's hyperparameters define it
            return
        self.check_checkpoint_file(str(ckpt_path), model)
