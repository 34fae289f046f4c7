"""Which settings the user wrote: keys given on the command line or in a ``--config`` file.

Why not compare parsed values with the parser's defaults: a value the user sets to the default
(``--model.batch_size 256``) would look automatic, and the auto profile would silently replace it.
Scanning what was written is exact. Keys come back as config paths without ``init_args``
(``model.buffer.capacity``), the form :mod:`iquitos_lightning.profile.profiles` uses; a dict value
(``--model.buffer '{capacity: 5000}'`` or a YAML mapping) counts for each key inside it. A config file is read
over its ``base`` (:func:`~iquitos_lightning.profile.bases.profile_yaml`): what the base writes, the profile writes.
Not scanned: jsonargparse's environment variables and default config files (this CLI uses neither).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import yaml

from iquitos_lightning.profile.bases import profile_yaml

CONFIG_FLAGS = ("--config", "-c")


def normalise(key: str) -> str:
    """``model.init_args.buffer.capacity`` -> ``model.buffer.capacity``."""
    return ".".join(part for part in key.split(".") if part and part != "init_args")


def _leaf_keys(prefix: str, value: Any) -> Iterator[str]:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            if key == "class_path":
                continue
            yield from _leaf_keys(f"{prefix}.{key}" if prefix else str(key), item)
    elif prefix:
        yield normalise(prefix)


def _parsed(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _flags(args: Sequence[str]) -> Iterator[tuple[str, str | None]]:
    """``(flag, value)`` pairs of ``--flag value`` and ``--flag=value``; a flag followed by a flag has no value."""
    index = 0
    while index < len(args):
        token = args[index]
        index += 1
        if not token.startswith("-"):
            continue
        if "=" in token:
            flag, value = token.split("=", 1)
            yield flag, value
        elif index < len(args) and not args[index].startswith("--"):
            yield token, args[index]
            index += 1
        else:
            yield token, None


def explicit_keys(args: Sequence[str]) -> set[str]:
    """Leaf config keys set by ``args`` (a LightningCLI command line, subcommand included) and its config files."""
    keys: set[str] = set()
    for flag, value in _flags(args):
        if flag in CONFIG_FLAGS:
            if value is not None:
                keys.update(_leaf_keys("", profile_yaml(value) or {}))
            continue
        key = flag.lstrip("-")
        keys.update(_leaf_keys(key, _parsed(value) if value is not None else None))
    return keys


def is_explicit(key: str, keys: set[str]) -> bool:
    """Whether ``key`` or a parent group of it was set (``model.buffer: null`` sets ``model.buffer.capacity``).

    Top-level names do not count as parents: ``--model SAC`` picks a class, it sets no value inside it.
    """
    parts = key.split(".")
    return any(".".join(parts[:length]) in keys for length in range(2, len(parts) + 1))


def config_files(args: Sequence[str]) -> list[str]:
    """The ``--config`` files of a command line, in order."""
    return [value for flag, value in _flags(args) if flag in CONFIG_FLAGS and value is not None]


def command_line_keys(args: Sequence[str]) -> set[str]:
    """Like :func:`explicit_keys`, but only what was typed on the command line (config files left out)."""
    keys: set[str] = set()
    for flag, value in _flags(args):
        if flag not in CONFIG_FLAGS:
            keys.update(_leaf_keys(flag.lstrip("-"), _parsed(value) if value is not None else None))
    return keys
