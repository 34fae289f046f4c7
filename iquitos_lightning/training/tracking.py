"""Experiment tracking: W&B offline unless the user opts in, and a CSV log that is always there.

Why offline by default: the users train on laptops and clusters without a W&B key or network; online
mode with a key but no network hangs ~90 s at start (measured with wandb 0.31; offline init takes
~0.5 s). An offline run is synced later with ``wandb sync <run dir>``. ``WANDB_MODE=online`` (with a
key) opts in; ``disabled`` turns W&B off entirely. The CSV log beside the checkpoints makes every
run readable without W&B.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import WandbLogger

from iquitos_lightning.fastpath.wandb_anonymous import drop_unset_anonymous
from iquitos_lightning.training.quiet import library_noise_quieted

WANDB_MODES = ("offline", "online", "disabled")
WANDB_ALIASES = {"dryrun": "offline", "run": "online"}
DEFAULT_PROJECT = "iquitos_lightning"


@dataclass
class TrackingConfig:
    """Experiment tracking of a ``fit``/``test`` run (the CSV log is always written)."""

    wandb: bool = True  # add a W&B logger (mode from WANDB_MODE, offline when unset; "disabled" turns it off)
    project: str = DEFAULT_PROJECT  # W&B project name


def resolve_wandb_mode() -> str:
    """The W&B mode in force: ``WANDB_MODE`` if set to a known mode, else ``offline``."""
    mode = os.environ.get("WANDB_MODE", "offline").strip().lower() or "offline"
    # wandb's own aliases: it sets WANDB_MODE=dryrun itself once an offline run has started.
    mode = WANDB_ALIASES.get(mode, mode)
    if mode not in WANDB_MODES:
        raise ValueError(f"WANDB_MODE={mode!r} is not one of {WANDB_MODES}")
    os.environ["WANDB_MODE"] = mode
    os.environ.setdefault("WANDB_SILENT", "true")
    return mode


class OfflineFirstWandbLogger(WandbLogger):
    """``WandbLogger`` whose mode follows ``WANDB_MODE`` and defaults to offline.

    Lightning's own ``offline=True`` would override a user's ``WANDB_MODE=online``; leaving
    ``offline`` unset would try the network. This resolves the mode once, from the environment.
    """

    def __init__(
        self,
        name: str | None = None,
        save_dir: str = "runs",
        project: str = DEFAULT_PROJECT,
        log_model: bool = False,
        **kwargs: Any,
    ) -> None:
        mode = resolve_wandb_mode()
        Path(save_dir).mkdir(parents=True, exist_ok=True)
        super().__init__(
            name=name,
            save_dir=save_dir,
            project=project,
            offline=mode == "offline",
            log_model=log_model,
            mode=mode,
            **kwargs,
        )
        if library_noise_quieted():  # with --verbose W&B still warns (quiet.py)
            drop_unset_anonymous(self)


def wandb_loggers(loggers: list[Any]) -> list[WandbLogger]:
    """The W&B loggers among a Trainer's loggers."""
    return [logger for logger in loggers if isinstance(logger, WandbLogger)]
