"""The Trainer every bench measurement uses: the training loop alone, nothing that writes or validates.

Why one place: a measured fit must not pay for logging, checkpoints, validation or a progress bar,
and every measurement must strip the same things, or their figures are not comparable.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl


def bare_trainer(**overrides: Any) -> pl.Trainer:
    """A frame-budgeted Trainer with no logger, checkpoints, validation, progress bar or summary."""
    settings: dict[str, Any] = {
        "accelerator": "auto",
        "devices": 1,
        "max_epochs": -1,
        "num_sanity_val_steps": 0,
        "limit_val_batches": 0,
        "logger": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "enable_checkpointing": False,
    }
    return pl.Trainer(**{**settings, **overrides})
