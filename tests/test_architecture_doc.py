"""docs/architecture.md names every module of the package and of its instruments (``benchmarks/``): a reader finds
each file's job there, and a new module that is not described, or a row left behind by a module that moved, fails
here instead of going unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "iquitos_lightning"
INSTRUMENTS = ROOT / "benchmarks"


def modules_of(package: Path) -> list[str]:
    """The modules of ``package`` (no ``__init__.py``), as paths relative to it; the scripts kept as records in a
    folder an import cannot name (``benchmarks/gpu-check-scripts/<date>/``) are not modules."""
    return [
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if path.name != "__init__.py" and all(part.isidentifier() for part in path.relative_to(package).parts[:-1])
    ]


def test_the_architecture_doc_names_every_module_of_the_package():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    package_modules = modules_of(PACKAGE)
    instruments = [f"benchmarks/{module}" for module in modules_of(INSTRUMENTS)]
    assert len(package_modules) > 100 and len(instruments) > 25  # the package and the instruments were found
    modules = package_modules + instruments
    missing = sorted(module for module in modules if f"`{module}`" not in doc)
    assert not missing, f"docs/architecture.md does not name {len(missing)} modules, e.g. {missing[:5]}"
    # and its table of every module names none that is gone (a module moved or removed takes its row along)
    rows = re.findall(r"^\| `([a-z0-9_/]+\.py)` \|", doc, re.MULTILINE)
    gone = sorted(row for row in rows if row not in modules)
    assert rows and not gone, f"docs/architecture.md describes modules that no longer exist: {gone}"
