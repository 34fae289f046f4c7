"""End a ``python -m iquitos_lightning`` process as soon as its command is done, without Python's teardown.

Why: once every ``atexit`` handler has run, CPython still tears the interpreter down: it clears every module's
globals and frees every object torch, Lightning, TorchRL, pandas and SciPy made. Measured on the 2-core machine
(``benchmarks/process_exit.py``), that is ~3 s of CPU after a smoke ``fit`` has returned, a sixth of the process,
paid by every command and every ``fit`` that ``compare``, ``tune``, ``bench`` and ``gpu-check`` start. Nothing of
the program's needs it: files are closed by the code that wrote them (checkpoints and reports through
:mod:`iquitos_lightning.atomic_files`, W&B by ``wandb.finish``), and the handlers that flush or join (``logging``,
``multiprocessing``, the collection workers' shutdown, Ray's) were registered later than :func:`skip_teardown` and
so run before it. mypy ends its process the same way (``mypy.util.hard_exit``).

Only the process's own command line does this (``main()`` without arguments); ``main([...])`` called in another
program, a test among them, returns normally. A command that raised (a traceback, an interrupt Python itself
reports) has no recorded status and goes through the normal exit.
"""

from __future__ import annotations

import atexit
import os
import sys

_status: int | None = None


def skip_teardown() -> None:
    """Register the fast exit. Call it first thing in the process, so it is the last ``atexit`` handler to run."""
    atexit.register(_exit_without_teardown)


def record_status(code: int) -> None:
    """The status the process ends with, once its command has returned it."""
    global _status
    _status = code


def _exit_without_teardown() -> None:
    if _status is None:  # the command did not return: leave the exit to Python
        return
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed, or a pipe whose reader has gone
            pass
    os._exit(_status)
