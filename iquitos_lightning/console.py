"""The console every command prints through: tables at their full width when the output is a log file.

Why: runs go to the background with their output in a file, and rich cuts a table to 80 columns when its stream is
not a terminal (``│ ev_… │ 228… │``), so the reference table and the run reports were unreadable in exactly the file a
user reads afterwards. On a terminal rich keeps following the window's width.
"""

from __future__ import annotations

from rich.console import Console

# Columns a table may take in a log file or a pipe: wider than any table of the project, so none is cut.
LOG_FILE_WIDTH = 400


def command_console() -> Console:
    """A rich console: the terminal's width on a terminal, :data:`LOG_FILE_WIDTH` columns elsewhere."""
    console = Console()
    return console if console.is_terminal else Console(width=LOG_FILE_WIDTH)
