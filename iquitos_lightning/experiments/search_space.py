"""A hyperparameter search space, declared in a YAML beside the profile it searches (``configs/search/*.yaml``).

Why a file and not code: the space is part of the experiment's record (the study's outputs name it), a user
widens or narrows it without touching Python, and it is checked against the agent's real options before a
single trial runs: a misspelt ``actor_lrr`` is one ``error:`` line, not twenty trials that ignored it.

Format (keys are ``fit`` options as on the command line, without ``--``)::

    profile: configs/experiments/tariff/sac_residual_tariff_twin_cpu.yaml
    params:
      model.init_args.actor_lr: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}
      model.init_args.actor_delay_frames: {type: int, low: 0, high: 8192, step: 1024}
      model.init_args.hidden_sizes: {type: categorical, choices: ["[64, 64]", "[128, 128]"]}

A categorical choice is a YAML scalar; a list value (``hidden_sizes``) is written as its YAML text, which is
what the ``fit`` command line takes and what the tuned YAML gets back as a list.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from iquitos_lightning.errors import ConfigError
from iquitos_lightning.experiments.profiles import resolve_profile
from iquitos_lightning.profile.bases import profile_yaml

MODEL_PREFIX = "model.init_args."
KINDS = {"float": ("low", "high"), "int": ("low", "high"), "categorical": ("choices",)}
OPTIONAL = {"float": ("log", "step"), "int": ("log", "step"), "categorical": ()}


class SearchSpaceError(ConfigError):
    """A search-space YAML that cannot be searched: unknown option, bad range, missing profile."""


@dataclass(frozen=True)
class Param:
    """One searched option: its ``fit`` key and how Optuna draws it."""

    key: str  # e.g. model.init_args.actor_lr
    kind: str  # float | int | categorical
    spec: dict[str, Any]

    @property
    def name(self) -> str:
        """The name in the study and its table: the key without ``model.init_args.``."""
        return self.key.removeprefix(MODEL_PREFIX)

    def suggest(self, trial: Any) -> Any:
        """Draw this option's value for an Optuna trial (``trial.suggest_*``)."""
        if self.kind == "categorical":
            return trial.suggest_categorical(self.name, list(self.spec["choices"]))
        options = {key: self.spec[key] for key in OPTIONAL[self.kind] if key in self.spec}
        suggest = trial.suggest_float if self.kind == "float" else trial.suggest_int
        return suggest(self.name, self.spec["low"], self.spec["high"], **options)

    def override(self, value: Any) -> str:
        """The ``fit`` command-line override that sets this option to ``value``."""
        return f"--{self.key}={value}"

    def yaml_value(self, value: Any) -> Any:
        """The value as it goes into a config YAML (a categorical's text parsed: ``"[64, 64]"`` -> ``[64, 64]``)."""
        return yaml.safe_load(value) if isinstance(value, str) else value


@dataclass(frozen=True)
class SearchSpace:
    path: Path
    profile: Path
    params: tuple[Param, ...]

    @property
    def name(self) -> str:
        return self.path.stem

    def as_record(self) -> dict[str, Any]:
        """What a study remembers of its space, to refuse resuming it with another one."""
        return {"profile": str(self.profile), "params": {p.key: {"type": p.kind, **p.spec} for p in self.params}}


def load_search_space(path: Path) -> SearchSpace:
    """Read and check a search-space YAML: the profile exists, every key is an option of its model, ranges hold."""
    if not path.exists():
        raise SearchSpaceError(f"--search {path}: no such file (see configs/search/ for examples)")
    raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict) or not isinstance(raw.get("params"), dict) or not raw["params"]:
        raise SearchSpaceError(f"{path}: needs 'profile: <config yaml>' and a non-empty 'params:' mapping")
    written = Path(str(raw.get("profile", "")))
    profile = resolve_profile(written)  # a path from before configs/experiments/ is found there
    if profile is None:
        raise SearchSpaceError(f"{path}: profile {str(written)!r} is not a file")
    model = (profile_yaml(profile) or {}).get("model") or {}
    options = model_options(str(model.get("class_path", "")), path)
    params = tuple(_param(path, key, spec, options) for key, spec in raw["params"].items())
    return SearchSpace(path, profile, params)


def _param(path: Path, key: str, spec: Any, options: dict[str, set[str] | None]) -> Param:
    where = f"{path}: {key}"
    if not key.startswith(MODEL_PREFIX):
        raise SearchSpaceError(f"{where}: only model options are searched (keys start with {MODEL_PREFIX!r})")
    head, _, sub = key.removeprefix(MODEL_PREFIX).partition(".")
    if head not in options:
        _unknown(where, head, sorted(options))
    fields = options[head]
    if sub and fields is None:
        raise SearchSpaceError(f"{where}: option {head!r} has no sub-options")
    if sub and sub not in (fields or set()):
        _unknown(where, f"{head}.{sub}", sorted(f"{head}.{name}" for name in fields or ()))
    if not isinstance(spec, dict) or spec.get("type") not in KINDS:
        raise SearchSpaceError(f"{where}: give 'type:' one of {', '.join(KINDS)}")
    kind = spec["type"]
    missing = [name for name in KINDS[kind] if name not in spec]
    extra = sorted(set(spec) - {"type", *KINDS[kind], *OPTIONAL[kind]})
    if missing or extra:
        raise SearchSpaceError(f"{where}: a {kind} needs {', '.join(KINDS[kind])}; got {sorted(spec)}")
    body = {name: value for name, value in spec.items() if name != "type"}
    if kind == "categorical" and (not isinstance(body["choices"], list) or not body["choices"]):
        raise SearchSpaceError(f"{where}: choices must be a non-empty list")
    if kind != "categorical" and not body["low"] < body["high"]:
        raise SearchSpaceError(f"{where}: low ({body['low']}) must be below high ({body['high']})")
    return Param(key, kind, body)


def _unknown(where: str, option: str, known: list[str]) -> typing.NoReturn:
    close = difflib.get_close_matches(option, known, n=1)
    hint = f": did you mean {MODEL_PREFIX + close[0]!r}?" if close else f" (options: {', '.join(known)})"
    raise SearchSpaceError(f"{where}: unknown option {option!r} of the profile's model{hint}")


def model_options(class_path: str, where: Path) -> dict[str, set[str] | None]:
    """The options of a model class: constructor parameters, each with its dataclass's fields (None: a plain value).

    Read from the signatures of the class and its bases (PPO and A2C pass ``**kwargs`` down to the on-policy
    layer), so the search space is checked against the code, not against a list kept by hand.
    """
    module_name, _, class_name = class_path.rpartition(".")
    try:
        model_class = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as error:
        raise SearchSpaceError(f"{where}: the profile's model {class_path!r} cannot be loaded ({error})") from error
    options: dict[str, set[str] | None] = {}
    for cls in model_class.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        hints = typing.get_type_hints(init)
        for name, parameter in inspect.signature(init).parameters.items():
            if name == "self" or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            config = next((arg for arg in typing.get_args(hints.get(name)) if dataclasses.is_dataclass(arg)), None)
            config = config or (hints.get(name) if dataclasses.is_dataclass(hints.get(name)) else None)
            options.setdefault(name, {field.name for field in dataclasses.fields(config)} if config else None)
    return options
