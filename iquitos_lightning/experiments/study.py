"""The Optuna pieces that the ``tune`` driver and each trial's ``fit`` process must build alike.

Why shared: a trial's pruning decision is taken inside its ``fit`` process (:mod:`.pruning`), which opens the
study from its storage and must judge with the same pruner and the same notion of "better" as the driver that
created it; Optuna stores neither the pruner nor how a value was measured. Both sides call these functions.

Storage: a path is a journal file (Optuna's ``JournalFileBackend``: appends under a file lock, no server; on
one machine, or on a shared file system whose locks work across nodes); a URL with ``://`` is an RDB
(``sqlite:///study.db`` on one machine, ``postgresql://user@host/db`` on a cluster).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iquitos_lightning.errors import ConfigError
from iquitos_lightning.report.comparison import objective_value

PRUNERS = ("median", "none")
DIRECTIONS = {"thesis": "maximize", "tariff": "minimize"}  # the return is better higher, the bill lower


def open_storage(storage: str) -> Any:
    """The Optuna storage ``storage`` names: an RDB URL (``...://...``) or a journal file path."""
    # lazy: optuna is needed by `tune` and its trials only
    import optuna
    from optuna.storages.journal import JournalFileBackend

    if "://" in storage:
        try:
            return optuna.storages.RDBStorage(storage)
        except (ImportError, ModuleNotFoundError, ValueError) as error:
            raise ConfigError(f"--storage {storage}: cannot open this database ({error})") from error
        except Exception as error:  # SQLAlchemy's OperationalError and kin: no server, wrong credentials
            raise ConfigError(f"--storage {storage}: cannot connect ({str(error).splitlines()[0]})") from error
    path = Path(storage)
    path.parent.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(JournalFileBackend(str(path)))


def make_pruner(kind: str, startup_trials: int) -> Any:
    """``median``: stop a trial whose evaluation is worse than the median of earlier trials' at the same frames,
    once ``startup_trials`` trials have finished; ``none``: never prune."""
    # lazy: optuna is needed by `tune` and its trials only
    import optuna

    if kind == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=0)
    if kind == "none":
        return optuna.pruners.NopPruner()
    raise ConfigError(f"--pruner {kind!r}: choose from {', '.join(PRUNERS)}")


def direction(objective: str) -> str:
    """``maximize`` or ``minimize``: how the study ranks values of ``objective``."""
    if objective not in DIRECTIONS:
        raise ConfigError(f"objective {objective!r} cannot be tuned: choose a profile on {', '.join(DIRECTIONS)}")
    return DIRECTIONS[objective]


def evaluation_value(metrics: dict[str, float], objective: str) -> float:
    """A periodic evaluation's value on ``objective`` from the logged ``val/...`` metrics (the thesis return, or the
    tariff bill): the same definition as the comparison table's (report/comparison.py)."""
    row = {key.rsplit("/", 1)[-1]: float(value) for key, value in metrics.items() if key.startswith("val/")}
    return objective_value(row, objective, agent=True)
