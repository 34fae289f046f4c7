"""Library noise filtered at its source, so a run's output is the run's: ``--verbose`` shows it again.

Why: every `fit` printed Lightning's advertisement for litlogger and a LeafSpec deprecation warning that
Lightning's own pytree helper triggers inside torch, and W&B warned that "the anonymous setting has no
effect" (Lightning's ``WandbLogger`` always passes ``anonymous=None``; the W&B logger of
:mod:`~iquitos_lightning.training.tracking` leaves it out when :func:`library_noise_quieted`). None is about
the user's run, and the line that matters (an error, the checkpoint folder) drowned among them. Each filter
matches one known message, so anything new still shows.
"""

from __future__ import annotations

import logging
import warnings

# Lightning's rank-zero logger, where the litlogger tip is an INFO record, and its signal connector, which
# logs "[rank: 0] Received SIGTERM: 15" above the CLI's own line saying where the checkpoint is.
LIGHTNING_RANK_ZERO_LOGGER = "lightning.pytorch.utilities.rank_zero"
LIGHTNING_SIGNAL_LOGGER = "lightning.pytorch.trainer.connectors.signal_connector"
NOISY_LOGGERS = (LIGHTNING_RANK_ZERO_LOGGER, LIGHTNING_SIGNAL_LOGGER)
NOISE_IN_LOG_RECORDS = ("try installing [litlogger]", "Received SIGTERM")
NOISE_WARNINGS = (r"`isinstance\(treespec, LeafSpec\)` is deprecated",)


class _DropKnownNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(noise in message for noise in NOISE_IN_LOG_RECORDS)


_FILTER = _DropKnownNoise()
_quiet = False  # set by quiet_library_noise; read where a noise is avoided rather than filtered


def library_noise_quieted() -> bool:
    """Whether this process asked for the known noise to go (the CLI without ``--verbose``)."""
    return _quiet


def quiet_library_noise(verbose: bool = False) -> None:
    """Drop the known library messages (nothing when ``verbose``); idempotent."""
    global _quiet
    _quiet = not verbose
    loggers = [logging.getLogger(name) for name in NOISY_LOGGERS]
    if verbose:
        for logger in loggers:
            logger.removeFilter(_FILTER)
        return
    for logger in loggers:
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    for message in NOISE_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
