"""How collection workers are started: forked from one fork server that has imported what a worker needs.

Why not ``spawn`` (TorchRL's choice, set process-wide when TorchRL is imported): a spawned worker is a fresh
interpreter that imports torch, TorchRL and the env stack (and the parent's main module) before it collects, every
worker of every collector of a process. A fork server (``multiprocessing``'s ``forkserver``, Python 3.14's default
on Linux) imports them once, when the first worker starts, and forks each worker from that state. Measured on the
2-core machine: the collection tests 72.6 -> 18.0 s of CPU; the robustness, resume, collection and quick-bench tests
together 271 -> 161 s (docs/experiments.md, "suite time, measured and cut"). It is no ``fork`` of the training
process (none of its threads, CUDA state or Lightning is copied), and a worker still rebuilds its env from its
picklable maker and seeds it, as under ``spawn`` (whatever pickles for ``spawn`` pickles for ``forkserver``).

The stop signals: the fork server is started with the first worker, inside
:func:`~iquitos_lightning.agents.collection.stop_signals_blocked`, so it and every worker forked from it start with
SIGINT and SIGTERM blocked (a process inherits its parent's mask), as spawned workers did; the worker's env maker
ignores them, then unblocks (envs/factory.py). The server keeps them blocked: a Ctrl-C or SIGTERM to the process
group does not end it, and it exits when the process that started it does.

Process-wide, as TorchRL's own choice is: TorchRL reads the global start method. Replaced only where it is TorchRL's
``spawn`` or unset; a program that chose ``fork`` keeps it (one that chose ``spawn`` itself cannot be told from
TorchRL's, and gets the fork server: what pickles for one pickles for the other).
"""

from __future__ import annotations

import multiprocessing

FORK_SERVER = "forkserver"
REPLACED = (None, "spawn")  # unset, or what TorchRL sets when it is imported
# What a worker imports to rebuild its env: agents/site_envs.py and what it imports (torch, TorchRL, the env stack),
# not Lightning (tests/agents/test_collection.py).
PRELOADED = ["iquitos_lightning.agents.site_envs"]


def use_a_fork_server() -> str:
    """Start this process's workers from a fork server unless the program chose another method, or the platform
    has none (Windows); returns the start method the workers get."""
    current = multiprocessing.get_start_method(allow_none=True)
    if current in REPLACED and FORK_SERVER in multiprocessing.get_all_start_methods():
        multiprocessing.set_start_method(FORK_SERVER, force=True)
        multiprocessing.set_forkserver_preload(PRELOADED)
    return multiprocessing.get_start_method()
