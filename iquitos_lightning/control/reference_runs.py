"""Reference runs of a site year (the peak shaver's peaks, a baseline controller's rewards), kept in memory and on disk
beside the site they were run on.

Why: every training twin with the default ``start_peak: reference`` needs the peak shaver's run over each of its years
before the first step (envs/start_peak.py, control/training_references.py). With four training years, run together in
one batched twin, that is ~38 s of a fit's start on the 2-core machine, and more on a lent GPU machine, where each
second is counted:
eight whole fits of a GPU check spent four minutes of a fifteen-minute loan recomputing the same arrays. A run's result
is a function of the site files, the series, the options and the code, so it is stored under a digest of all four
(``<site folder>/reference-runs/<kind>-<digest>.npy``) and read back by the next process. The digest of the code is the
bytes of every module a reference run computes with (the packages ``iquitos_lightning/envs`` and
``iquitos_lightning/site``: physics, layouts, objectives, forecasts; and the controllers and the residual wrapper of
``control/`` it runs): any change to them runs the references again. A folder that cannot be written keeps the process
cache only.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

import numpy as np

CACHE_FOLDER = "reference-runs"
_IN_PROCESS: dict[str, np.ndarray] = {}


CODE_PACKAGES = ("envs", "site")  # under iquitos_lightning/: what a reference run computes with
# the modules of control/ a reference run runs: its controllers, the residual wrapper, the runs themselves
CONTROL_MODULES = ("fleet_rule.py", "peak_shaver.py", "residual.py", "training_references.py")


@cache
def code_digest() -> str:
    """A digest of the source a reference run computes with (``CODE_PACKAGES`` and ``CONTROL_MODULES``)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    modules = [path for package in CODE_PACKAGES for path in (root / package).glob("*.py")]
    modules += [root / "control" / name for name in CONTROL_MODULES]
    for module in sorted(modules):
        digest.update(f"{module.parent.name}/{module.name}".encode())
        digest.update(module.read_bytes())
    return digest.hexdigest()


def cache_path(schema_path: Path, kind: str, key: str) -> Path:
    """Where the run of ``kind`` with ``key`` (a digest of its inputs) is kept, beside the site's schema."""
    name = hashlib.sha256(f"{key}/{code_digest()}".encode()).hexdigest()[:32]
    return Path(schema_path).parent / CACHE_FOLDER / f"{kind}-{name}.npy"


def cached_reference(schema_path: Path, kind: str, key: str, run: Callable[[], np.ndarray]) -> np.ndarray:
    """The reference run of ``kind`` with inputs digested in ``key``: from this process, else from the site folder,
    else ``run()`` (then kept in both; written atomically, so parallel runs of a comparison never read half a file)."""
    (values,) = cached_references(schema_path, kind, [key], lambda missing: [run()])
    return values


def cached_references(
    schema_path: Path, kind: str, keys: Sequence[str], run: Callable[[list[int]], list[np.ndarray]]
) -> list[np.ndarray]:
    """The reference runs of ``kind`` with inputs digested in ``keys``, each as :func:`cached_reference`'s, with the
    missing ones run together: ``run(missing)`` gets the indices into ``keys`` of those neither this process nor the
    site folder holds and returns their values in that order (why together: a batched twin runs four years in about
    the time of one)."""
    paths = [cache_path(schema_path, kind, key) for key in keys]
    values = [_IN_PROCESS.get(str(path)) for path in paths]
    values = [_read(path) if value is None else value for path, value in zip(paths, values, strict=True)]
    missing = [index for index, value in enumerate(values) if value is None]
    if missing:
        for index, result in zip(missing, run(missing), strict=True):
            _write(paths[index], result)
            values[index] = result
    for path, value in zip(paths, values, strict=True):
        _IN_PROCESS[str(path)] = value
    return values  # type: ignore[return-value]  # every None was filled


def _read(path: Path) -> np.ndarray | None:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError):  # absent, unreadable or cut short: run it again
        return None


def _write(path: Path, values: np.ndarray) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npy", delete=False) as handle:
            np.save(handle, values, allow_pickle=False)
        os.replace(handle.name, path)
    except OSError:  # a read-only site folder: this process keeps it
        return
