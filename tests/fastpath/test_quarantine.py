"""No module outside ``fastpath/`` touches a library's private name; each fast-path module pins what it touches.

Why: an override of a library internal is correct only for the library version it was written against
(iquitos_lightning/fastpath/__init__.py). Kept in one package, with a ``pins.require`` check at import, a new
library version fails at import with one clear line instead of deep in a run. Two checks find a private name
elsewhere:

- read from the source (``ast``): an attribute ``x._name`` whose ``_name`` nothing in the package outside
  ``fastpath/`` defines (a ``def``, a class, an assignment) is someone else's private name;
- read from the classes (imported): a method ``_name`` of a class outside ``fastpath/`` that a library class
  in its MRO also has overrides a library internal, unless the library declares it abstract (TorchRL's
  ``EnvBase._step``/``_reset``/``_set_seed``: the documented way to write an env).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "iquitos_lightning"
PRIVATE = re.compile(r"^_[a-z][A-Za-z0-9_]*$")  # not dunders
# Documented public API whose name starts with an underscore (the standard library's own reference lists it).
PUBLIC_DESPITE_UNDERSCORE = {"os._exit"}


def modules_outside_fastpath() -> Iterator[Path]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if "fastpath" not in path.relative_to(PACKAGE).parts:
            yield path


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def private_names_defined(tree: ast.AST) -> set[str]:
    """The private names a module defines: functions, classes, assigned names and attributes, parameters."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.rsplit(".", 1)[-1])
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr" and len(node.args) > 1:
            if isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                names.add(node.args[1].value)
    return {name for name in names if PRIVATE.match(name)}


TREES = {path: ast.parse(path.read_text(), filename=str(path)) for path in modules_outside_fastpath()}
OWN_PRIVATE_NAMES = set().union(*(private_names_defined(tree) for tree in TREES.values()))


def foreign_private_attributes(tree: ast.AST) -> list[tuple[int, str]]:
    return [
        (node.lineno, ast.unparse(node))
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and PRIVATE.match(node.attr)
        and node.attr not in OWN_PRIVATE_NAMES
        and ast.unparse(node) not in PUBLIC_DESPITE_UNDERSCORE
    ]


@pytest.mark.parametrize("path", list(TREES), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_no_module_outside_fastpath_reads_a_private_name_it_does_not_define(path: Path) -> None:
    found = foreign_private_attributes(TREES[path])
    assert not found, f"{path.relative_to(PACKAGE)} reads a library's private names: {found}; move it to fastpath/"


def library_overrides(module) -> list[str]:
    overrides = []
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if cls.__module__ != module.__name__:
            continue
        libraries = [base for base in cls.__mro__[1:] if not base.__module__.startswith("iquitos_lightning")]
        for name, value in vars(cls).items():
            written_here = inspect.isfunction(value) or isinstance(value, property | classmethod | staticmethod)
            owner = next((base for base in libraries if name in vars(base)), None)
            if written_here and PRIVATE.match(name) and owner is not None:
                if getattr(vars(owner)[name], "__isabstractmethod__", False):
                    continue  # the library asks subclasses to write it
                overrides.append(f"{cls.__name__}.{name} overrides {owner.__module__}.{owner.__qualname__}.{name}")
    return overrides


@pytest.mark.parametrize("path", list(TREES), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_no_class_outside_fastpath_overrides_a_library_private_method(path: Path) -> None:
    module = importlib.import_module(module_name(path))
    assert not library_overrides(module)


def test_the_checks_catch_a_private_read_and_an_override() -> None:
    """The two checks are not vacuous: a library private name read and a private method overridden are found."""
    tree = ast.parse("import torch\ntorch._foreach_lerp_(a, b, 0.5)\nx = self._not_defined_anywhere_here\n")
    assert sorted(text for _, text in foreign_private_attributes(tree)) == [
        "self._not_defined_anywhere_here",
        "torch._foreach_lerp_",
    ]
    import types

    import torch

    module = types.ModuleType("probe")

    class Moves(torch.nn.Module):
        def _apply(self, fn, recurse=True):
            return super()._apply(fn, recurse)

    Moves.__module__ = "probe"
    module.Moves = Moves
    assert library_overrides(module) == ["Moves._apply overrides torch.nn.modules.module.Module._apply"]


def fastpath_modules() -> list[Path]:
    return [path for path in sorted((PACKAGE / "fastpath").glob("*.py")) if path.stem not in {"__init__", "pins"}]


@pytest.mark.parametrize("path", fastpath_modules(), ids=lambda path: path.stem)
def test_every_fastpath_module_pins_what_it_touches(path: Path) -> None:
    """Each fast-path module calls ``pins.require`` (or ``pins.missing`` for a logged fallback) and the package's
    table names it with its equivalence test."""
    source = path.read_text()
    assert re.search(r"\b(require|missing)\(", source), f"{path.name} has no pins.require/missing check"
    assert f"``{path.stem}``" in (PACKAGE / "fastpath" / "__init__.py").read_text()
