"""A training profile's YAML with its ``base:`` resolved: the one reading of a profile for the CLI and every tool.

Why: the card's profiles (``configs/{sac,ppo,a2c}_{cpu,rtx4060,auto}.yaml``) share each agent's settings, kept once
in ``configs/base/<agent>.yaml``; a profile names its base (``base: configs/base/sac.yaml``, a path from the
repository root like every path in ``configs/``) and writes only what its card changes. Why not jsonargparse's own
nesting: a ``config:`` key inside a config file replaces the base's top-level groups whole (an overlay's
``model: {init_args: ...}`` drops the base's class and every other argument), and a group's value given as a file
path cannot take overrides beside it in the same file. So the base is merged here, before jsonargparse parses:
mappings merge key by key (recursively), anything else (a list, a number, ``null``) replaces the base's value, and
a mapping whose ``class_path`` differs from the base's replaces it whole (another class's arguments do not carry
over). A base may name its own base. The CLI's parser (:class:`iquitos_lightning.cli.ProfileParser`), the auto
profile's "what was written" (:mod:`.explicit_settings`) and the tools that read a profile's values (``compare``,
``tune``, ``bench``) all go through :func:`profile_yaml`, so a value is read the same way everywhere; a run's saved
``config.yaml`` and ``--print_config`` hold the resolved config, with no ``base`` left.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from iquitos_lightning.errors import ConfigError

BASE_KEY = "base"


def profile_yaml(path: str | Path) -> Any:
    """The YAML mapping of the profile at ``path`` over its base's (recursively); a file without ``base`` as it is."""
    return _resolved(Path(path), ())


def names_a_base(path: str | Path) -> bool:
    """Whether the YAML file at ``path`` is a mapping with a ``base`` key (False when it cannot be read as one)."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and BASE_KEY in data


def merged(base: Any, overlay: Any) -> Any:
    """``overlay`` over ``base``: mappings key by key, anything else replaced (a list is not merged)."""
    if not isinstance(base, dict) or not isinstance(overlay, dict):
        return overlay
    if len({base.get("class_path"), overlay.get("class_path")} - {None}) > 1:
        return overlay  # another class: the base's init_args are not its arguments
    result = dict(base)
    for key, value in overlay.items():
        result[key] = merged(base[key], value) if key in base else value
    if "class_path" in result:  # first, where jsonargparse prints it (a class keeps its keys in the order they come)
        result = {"class_path": result.pop("class_path"), **result}
    return result


def _resolved(path: Path, chain: tuple[Path, ...]) -> Any:
    """``path``'s mapping over its bases; ``chain``: the files that led to it, the profile first."""
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or BASE_KEY not in data:
        return data if data is not None else {}
    profile = chain[0] if chain else path
    base = data.pop(BASE_KEY)
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{profile}: base must be the path of a YAML file (configs/base/<agent>.yaml), not {base!r}")
    base_path = Path(base)
    if not base_path.is_file():
        raise ConfigError(
            f"{profile}: its base {base} is not a file (a base is named by its path from the repository root, where "
            "commands run, e.g. configs/base/sac.yaml)"
        )
    chain = (*chain, path)
    if base_path.resolve() in {step.resolve() for step in chain}:
        raise ConfigError(f"{profile}: its bases loop ({' -> '.join(map(str, (*chain, base_path)))})")
    return merged(_resolved(base_path, chain), data)
