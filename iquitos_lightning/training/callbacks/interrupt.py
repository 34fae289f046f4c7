"""Ctrl-C as a request: the first one asks training to stop at the next consistent point, the second stops at once.

Why not Lightning's own handling alone: Lightning turns Ctrl-C into ``KeyboardInterrupt`` wherever
it lands, possibly halfway through a rollout or between SAC's optimizer steps; a checkpoint taken
there is loadable but counts a rollout whose updates were not all made. With this handler
installed (by :class:`~iquitos_lightning.training.callbacks.frame_checkpoint.FrameCheckpoint` for the length of
``fit``), the first SIGINT only sets :attr:`InterruptRequest.requested`; the checkpoint callback
then saves after the current training batch (or after the validation in progress) and stops the
run. A second Ctrl-C raises ``KeyboardInterrupt`` at once, for a user who cannot wait.

SIGTERM (``timeout``, ``kill -- -PGID``, a scheduler) is Lightning's to catch: its handler only sets
``trainer.received_sigterm`` and raises ``SIGTERMException`` after the batch in progress. The checkpoint
callback reads that flag as the same request (:meth:`InterruptRequest.note_sigterm`), so the run saves after
the current rollout and the CLI exits with 143 saying where the checkpoint is. Collection workers ignore
both signals (``envs.factory.worker_env_makers``): the training process decides when they stop.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Any

REQUEST_MESSAGE = (
    "\nCtrl-C: stopping after the current rollout and its updates, then saving a checkpoint "
    "(press Ctrl-C again to stop at once)"
)


_last_installed: InterruptRequest | None = None


def last_request() -> InterruptRequest | None:
    """The request handler installed by the latest ``fit`` of this process (None: none since :func:`forget`)."""
    return _last_installed


def forget() -> None:
    """Forget the previous run's request (the CLI calls it before each command)."""
    global _last_installed
    _last_installed = None


class InterruptRequest:
    """A SIGINT handler that records the first Ctrl-C and raises ``KeyboardInterrupt`` on the second."""

    def __init__(self) -> None:
        self.requested = False
        self.terminated = False  # the request came from SIGTERM (exit status 143), not Ctrl-C (130)
        self.saved_to: str | None = None  # the checkpoint saved since (set by the checkpoint callback)
        self.up_to_date: str | None = None  # or the last checkpoint, when it already held the run's state
        self._previous: Any = None
        self._installed = False

    def install(self) -> None:
        """Take over SIGINT (main thread only: signal handlers cannot be set elsewhere)."""
        global _last_installed
        if self._installed or threading.current_thread() is not threading.main_thread():
            return
        _last_installed = self
        self.requested = self.terminated = False
        self.saved_to = self.up_to_date = None
        self._previous = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, self._on_sigint)
        self._installed = True

    def restore(self) -> None:
        """Give SIGINT back to whoever had it before :meth:`install` (idempotent)."""
        if not self._installed:
            return
        signal.signal(signal.SIGINT, self._previous if self._previous is not None else signal.default_int_handler)
        self._installed = False

    def note_sigterm(self) -> None:
        """SIGTERM arrived (Lightning's handler saw it): stop and save as after a first Ctrl-C, then exit 143."""
        self.requested = self.terminated = True

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            self.restore()
            raise KeyboardInterrupt
        self.requested = True
        print(REQUEST_MESSAGE, file=sys.stderr, flush=True)
