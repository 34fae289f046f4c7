"""The package's layers, read from its import graph: every import points down the data flow.

The stack (docs/architecture.md), bottom first; a module may import its own layer and the layers below:

    errors, atomic_files < fastpath < site < metrics < envs < report < control (citylearn_2022) < profile < agents
        < training < experiments < cli, __main__, callbacks (the public face of training.callbacks)

The instruments that measure the product (the top-level package ``benchmarks``: the ``bench`` and ``gpu-check``
commands' code, the suite timers) stand above it all: they may import any of the package, and the package imports
them only in ``__main__``, lazily, when one of those two commands runs.

The graph is read with ``ast`` from the source (nothing is imported), module-level and function-level
imports alike, so an upward import cannot hide inside a function. Function-level imports are allowed only
for optional or heavy dependencies and must say so in a ``# lazy:`` comment on the import's line or above its
block of imports, in the package and in the instruments alike.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "iquitos_lightning"
INSTRUMENTS = PACKAGE.parent / "benchmarks"
# The package modules that may import the instruments: the command line's entry, for `bench` and `gpu-check`.
INSTRUMENT_USERS = ("__main__",)

# Bottom first. A module belongs to the first entry that is its name or a parent package of it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "atomic_files", "console", "process_exit"),
    ("fastpath",),
    ("site",),
    ("metrics",),
    ("envs",),
    ("report",),
    ("control", "citylearn_2022"),
    ("profile",),
    ("agents",),
    ("training",),
    ("experiments",),
    ("cli", "__main__", "callbacks"),
)


def layer_of(module: str) -> int:
    """The layer index of ``iquitos_lightning.<module>`` (a dotted name relative to the package)."""
    parts = module.split(".")
    for index, names in enumerate(LAYERS):
        if parts[0] in names:
            return index
    raise AssertionError(f"iquitos_lightning.{module} is in no layer: add it to LAYERS and docs/architecture.md")


def module_name(path: Path, package: Path = PACKAGE) -> str:
    relative = path.relative_to(package).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def imported_modules(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> Iterator[str]:
    """The package modules an import statement names, relative to the package ("" for the package itself)."""
    relative = isinstance(node, ast.ImportFrom) and node.level > 0
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    elif relative:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        targets = [".".join([*base, node.module] if node.module else base)]
    else:
        targets = [node.module or ""]
    for target in targets:
        if target == "iquitos_lightning" or target.startswith("iquitos_lightning."):
            yield target.removeprefix("iquitos_lightning").lstrip(".")
        elif relative:
            yield target


class Import:
    def __init__(
        self, source: str, target: str, line: int, in_function: bool, lazy_comment: bool, root: str = PACKAGE.name
    ) -> None:
        self.source, self.target, self.line = source, target, line
        self.in_function, self.lazy_comment = in_function, lazy_comment
        self.root = root  # the package the source module is in

    def __repr__(self) -> str:
        target = self.target if self.target.split(".")[0] == INSTRUMENTS.name else f"{PACKAGE.name}.{self.target}"
        return f"{self.root}.{self.source}:{self.line} -> {target}"


def package_modules(package: Path) -> list[Path]:
    """The ``.py`` files of ``package`` that an import can name: every folder on the way a Python name, so the
    scripts kept as records beside the instruments (``benchmarks/gpu-check-scripts/<date>/``) are not counted."""
    return [
        path
        for path in sorted(package.rglob("*.py"))
        if all(folder.isidentifier() for folder in path.relative_to(package).parts[:-1])
    ]


def import_statements(package: Path = PACKAGE) -> Iterator[tuple[str, bool, ast.Import | ast.ImportFrom, bool, bool]]:
    """Every import statement of the package's modules: (its module, whether that is a package, the statement,
    inside a function, and whether a ``# lazy:`` comment explains it)."""
    for path in package_modules(package):
        module = module_name(path, package)
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines), filename=str(path))
        functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
        inside = {id(child) for function in functions for child in ast.walk(function) if child is not function}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            lazy = "# lazy:" in lines[node.lineno - 1] or any("# lazy:" in line for line in _block_above(lines, node))
            yield module, path.name == "__init__.py", node, id(node) in inside, lazy


def package_imports(package: Path = PACKAGE) -> list[Import]:
    """Every import of a package module by a package module, and every function-level import of anything."""
    found: list[Import] = []
    for module, is_package, node, in_function, lazy in import_statements(package):
        targets = list(imported_modules(node, module, is_package))
        for target in targets:
            found.append(Import(module, target, node.lineno, in_function, lazy, package.name))
        if in_function and not targets:
            found.append(Import(module, "", node.lineno, True, lazy, package.name))  # third-party, inside a function
    return found


def instrument_imports(package: Path = PACKAGE) -> list[Import]:
    """Every import of the instruments (``benchmarks`` or a module of it) by a package module."""
    found: list[Import] = []
    for module, _, node, in_function, lazy in import_statements(package):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            names = [node.module or ""] if node.level == 0 else []  # a relative import stays inside the package
        for name in names:
            if name.split(".")[0] == INSTRUMENTS.name:
                found.append(Import(module, name, node.lineno, in_function, lazy))
    return found


def _block_above(lines: list[str], node: ast.stmt) -> list[str]:
    """The lines above an import up to the first that is not an import, a comment or blank (its import block)."""
    block: list[str] = []
    for line in reversed(lines[: node.lineno - 1]):
        stripped = line.strip()
        if stripped and not stripped.startswith(("#", "import ", "from ")):
            break
        block.append(stripped)
    return block


def upward_imports(imports: list[Import]) -> list[Import]:
    return [item for item in imports if item.target and layer_of(item.target) > layer_of(item.source)]


def test_every_import_points_down_the_layers() -> None:
    upward = upward_imports(package_imports())
    assert not upward, "imports that run back up the layers (docs/architecture.md):\n" + "\n".join(map(repr, upward))


def test_every_module_has_a_layer() -> None:
    for path in PACKAGE.rglob("*.py"):
        module = module_name(path)
        if module:
            layer_of(module)


def test_function_level_imports_say_why() -> None:
    """Imports inside functions are for optional or heavy dependencies only, each with a ``# lazy:`` comment, in the
    package and in the instruments."""
    imports = package_imports() + package_imports(INSTRUMENTS)
    assert any(item.root == INSTRUMENTS.name and item.in_function for item in imports)  # the instruments were read
    unexplained = [item for item in imports if item.in_function and not item.lazy_comment]
    assert not unexplained, "function-level imports without a '# lazy:' reason:\n" + "\n".join(map(repr, unexplained))


def test_the_package_imports_the_instruments_only_where_bench_and_gpu_check_run() -> None:
    """The product does not depend on what measures it: ``benchmarks`` is imported by the command line's entry alone,
    inside the functions that run ``bench`` and ``gpu-check``."""
    imports = instrument_imports()
    assert {item.target for item in imports} >= {"benchmarks.bench.run", "benchmarks.gpu_check.run"}
    misplaced = [item for item in imports if item.source not in INSTRUMENT_USERS or not item.in_function]
    assert not misplaced, "package modules importing the instruments (benchmarks/):\n" + "\n".join(map(repr, misplaced))


def test_an_import_of_the_instruments_is_caught(tmp_path: Path) -> None:
    """The check itself: an env module importing ``benchmarks`` is reported, in every form; the command line's lazy
    import is not."""
    package = tmp_path / "iquitos_lightning"
    (package / "envs").mkdir(parents=True)
    (package / "__main__.py").write_text("def bench():\n    from benchmarks.bench.run import main  # lazy: test\n")
    (package / "envs" / "bad.py").write_text(
        "import benchmarks\nfrom benchmarks.bench import timing\n\ndef f():\n"
        "    import benchmarks.gpu_check.run as run  # lazy: test\n    from . import benchmarks\n"
    )
    imports = instrument_imports(package)
    misplaced = [item for item in imports if item.source not in INSTRUMENT_USERS or not item.in_function]
    assert [(item.source, item.target, item.line) for item in misplaced] == [
        ("envs.bad", "benchmarks", 1),
        ("envs.bad", "benchmarks.bench", 2),
        ("envs.bad", "benchmarks.gpu_check.run", 5),
    ]
    assert [(item.source, item.in_function) for item in imports if item not in misplaced] == [("__main__", True)]


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    """The check itself: an env module importing an agent is reported, at module level and inside a function."""
    package = tmp_path / "iquitos_lightning"
    (package / "envs").mkdir(parents=True)
    (package / "agents").mkdir()
    (package / "agents" / "sac.py").write_text("X = 1\n")
    (package / "envs" / "bad.py").write_text(
        "from iquitos_lightning.agents.sac import X\n\ndef f():\n    from ..agents import sac  # lazy: test\n"
    )
    (package / "envs" / "good.py").write_text("from iquitos_lightning.metrics.kpis import compute_kpis\n")
    upward = upward_imports(package_imports(package))
    assert [(item.source, item.target, item.line) for item in upward] == [
        ("envs.bad", "agents.sac", 1),
        ("envs.bad", "agents", 4),
    ]


def test_the_env_imports_no_controller_and_defines_none() -> None:
    """envs/ is the control problem (physics, observation, reward, layouts) and runs no controller: it imports
    nothing from control/ (a controller reads an env's ``hour_context()`` from above; reference runs reach the twin as
    tables; a residual is the wrapper of control/residual.py), and no public function or class of control/ has a
    namesake in envs/ (the rule, the peak shaver and their water-filling live once, in control/)."""
    from_envs = [item for item in package_imports() if item.source.split(".")[0] == "envs"]
    assert from_envs and not [item for item in from_envs if item.target.split(".")[0] == "control"]
    defined = {package: _public_definitions(PACKAGE / package) for package in ("envs", "control")}
    assert "rule_fleet_action" in defined["control"] and "flat_import_level" in defined["control"]
    assert not defined["envs"] & defined["control"]


def _public_definitions(package: Path) -> set[str]:
    """The names of the public module-level functions and classes of every module of ``package``."""
    names = set()
    for path in package.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
                names.add(node.name)
    return names


@pytest.mark.parametrize(
    ("source", "target"),
    [("metrics.kpis", "envs.citylearn"), ("report.tables", "experiments.baselines"), ("envs.twin", "control.residual")],
)
def test_layer_order_matches_the_data_flow(source: str, target: str) -> None:
    """KPI definitions sit below the envs that record flows; the report below the controllers it tabulates; the env
    below the controllers that act on it."""
    assert layer_of(source) < layer_of(target)
