"""The check each fast path runs at import: does the installed library still have what the override relies on?

Why: an override of a private name breaks silently when the library renames it (an ``AttributeError``
deep in a run, or worse, a fall back to the slow path that nobody notices). :func:`require` turns that
into one clear error at import naming the library, its installed version and the version the override
was verified with; :func:`missing` lets a module fall back instead, saying so in the log.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version

# The versions each override was written and tested against (requirements.lock pins the same).
VERIFIED_WITH = {
    "citylearn": "3.0.2",
    "jsonargparse": "4.53.0",
    "lightning": "2.6.6",
    "scipy": "1.17.1",
    "tensordict": "0.14.3",
    "torch": "2.13.0",
    "torchrl": "0.14.1",
}


class LibraryChanged(ImportError):
    """The installed library lacks a name one of our overrides relies on."""


def installed_version(library: str) -> str:
    try:
        return version(library)
    except PackageNotFoundError:
        return "not installed"


def missing(owner: object, names: Iterable[str]) -> list[str]:
    """The ``names`` that ``owner`` (a class, module or instance) does not have."""
    return [name for name in names if not hasattr(owner, name)]


def describe(owner: object, names: Iterable[str], library: str, override: str) -> str:
    """One sentence: what ``override`` needs of ``library`` that the installed version does not have."""
    owner_name = getattr(owner, "__qualname__", None) or getattr(owner, "__name__", None) or type(owner).__name__
    return (
        f"{override} relies on {owner_name}.{', '.join(names)} of {library}, which {library} "
        f"{installed_version(library)} does not have (verified with {library} {VERIFIED_WITH[library]}, "
        "the version requirements.lock pins): reinstall with scripts/install.sh, or update "
        f"iquitos_lightning/fastpath/ for this version"
    )


def require(owner: object, names: Iterable[str], *, library: str, override: str) -> None:
    """Raise :class:`LibraryChanged` when ``owner`` lacks any of ``names``."""
    absent = missing(owner, names)
    if absent:
        raise LibraryChanged(describe(owner, absent, library, override))
