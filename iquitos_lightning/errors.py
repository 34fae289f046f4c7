"""The project's error types: what a user can fix gets one clear line and a distinct exit status, never a trace.

Why one family: a bad value can surface anywhere (a site YAML, a CSV, a model argument, a
checkpoint, an env id) and usually deep inside jsonargparse, Lightning or torch, which wrap it in
their own exceptions. Every check in the project raises a :class:`ProjectError` subclass whose
message names the field and what would be valid; the entry points (``cli.run_lightning_cli``,
``__main__.main``) find it in the exception chain with :func:`find_project_error` and print
``error: <message>`` with the class's ``exit_code`` instead of a stack trace.

Exit statuses: 2 bad input (config, data, checkpoint of another run), 3 out of memory
(``callbacks.oom``), 4 numerical fault (non-finite losses or env values), 5 cannot write output
(disk full, read-only), 130 interrupted by Ctrl-C and 143 terminated by SIGTERM (a checkpoint was
saved in both cases).
"""

from __future__ import annotations

from typing import TypeVar

E = TypeVar("E", bound=BaseException)

INTERRUPTED_EXIT_CODE = 130
TERMINATED_EXIT_CODE = 143


class ProjectError(Exception):
    """An error the user can act on; its message is complete without a traceback."""

    exit_code = 1


class ConfigError(ProjectError, ValueError):
    """A configuration value, an input file or a checkpoint does not fit; the message names the field."""

    exit_code = 2


class NumericalFault(ProjectError, ArithmeticError):
    """Training met non-finite values (losses, gradients, env rewards or observations) it cannot skip."""

    exit_code = 4


class OutputWriteError(ProjectError, OSError):
    """An output (checkpoint, report) could not be written; what was there before is intact."""

    exit_code = 5


def find_in_chain(error: BaseException, kind: type[E]) -> E | None:
    """The first exception of ``kind`` in ``error``'s chain (itself, then up its ``__cause__``/``__context__``)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def find_project_error(error: BaseException) -> ProjectError | None:
    """The :class:`ProjectError` that caused ``error`` (itself, or up its ``__cause__``/``__context__`` chain)."""
    return find_in_chain(error, ProjectError)


def one_line(error: BaseException) -> str:
    """The error's message, and any notes added on the way up, as the text after ``error:``."""
    message = str(error).strip() or type(error).__name__
    notes = [note.strip() for note in getattr(error, "__notes__", []) if note.strip()]
    return "\n".join([message, *notes])
