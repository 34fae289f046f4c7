"""Lightning's ``WandbLogger`` without the ``anonymous=None`` it passes to ``wandb.init`` whatever the user says.

Why: W&B >= 0.2x warns on every run that the ``anonymous`` setting has no effect; left out, W&B says nothing. The
logger keeps ``wandb.init``'s keyword arguments in ``_wandb_init``. tests/test_first_hour.py checks the warning is gone
(and back with ``--verbose``).
"""

from __future__ import annotations

from lightning.pytorch.loggers import WandbLogger

from iquitos_lightning.fastpath.pins import require


def drop_unset_anonymous(logger: WandbLogger) -> None:
    """Remove ``anonymous`` from the logger's ``wandb.init`` arguments when nobody set it."""
    require(logger, ["_wandb_init"], library="lightning", override=__name__)
    if logger._wandb_init.get("anonymous", "set") is None:
        del logger._wandb_init["anonymous"]
