"""Library noise filtered at its source, so a run's output is the run's: ``--verbose`` shows it again.

Why: every `fit` printed Lightning's advertisement for litlogger and a LeafSpec deprecation warning that
Lightning's own pytree helper triggers inside torch, and W&B warned that "the anonymous setting has no
effect" (Lightning's ``WandbLogger`` always passes ``anonymous=None``; the W&B logger of
:mod:`~iquitos_lightning.training.tracking` leaves it out when :func:`library_noise_quieted`). None is about
the user's run, and the line that matters (an error, the checkpoint folder) drowned among them. Each filter
matches one known message, so anything new still shows.

TorchRL's console handler colours its lines with ANSI codes whatever the stream, so a log file or a pipe got
``\x1b[92m...`` around every line: :func:`plain_torchrl_lines` gives it a plain format there (and wherever
``NO_COLOR`` is set), whatever ``--verbose`` says (the lines stay, only the codes go).
"""

from __future__ import annotations

import logging
import os
import warnings

# Lightning's rank-zero logger, where the litlogger tip is an INFO record (and the note that the summary callback
# fit adds replaces Lightning's default), and its signal connector, which logs "[rank: 0] Received SIGTERM: 15"
# above the CLI's own line saying where the checkpoint is.
LIGHTNING_RANK_ZERO_LOGGER = "lightning.pytorch.utilities.rank_zero"
LIGHTNING_SIGNAL_LOGGER = "lightning.pytorch.trainer.connectors.signal_connector"
NOISY_LOGGERS = (LIGHTNING_RANK_ZERO_LOGGER, LIGHTNING_SIGNAL_LOGGER)
NOISE_IN_LOG_RECORDS = (
    "try installing [litlogger]",
    "Received SIGTERM",
    "Trainer already configured with model summary callbacks",  # fit's own ParameterSummary
)
NOISE_WARNINGS = (r"`isinstance\(treespec, LeafSpec\)` is deprecated",)
TORCHRL_LOGGER = "torchrl"
PLAIN_TORCHRL_FORMAT = "%(asctime)s [%(name)s][%(levelname)s] %(message)s"


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
    plain_torchrl_lines()
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


def plain_torchrl_lines() -> None:
    """TorchRL's console lines without colour codes when they go to a file or pipe, or ``NO_COLOR`` is set.

    Call after TorchRL is imported (its import replaces the ``torchrl`` logger's handlers).
    """
    for handler in logging.getLogger(TORCHRL_LOGGER).handlers:
        stream = getattr(handler, "stream", None)
        on_a_terminal = stream is not None and hasattr(stream, "isatty") and stream.isatty()
        if os.environ.get("NO_COLOR") or not on_a_terminal:
            handler.setFormatter(logging.Formatter(PLAIN_TORCHRL_FORMAT))
