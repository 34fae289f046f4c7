"""docs/architecture.md names every module of the package: a reader finds each file's job there, and a new module
that is not described fails here instead of going unnoticed."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "iquitos_lightning"


def test_the_architecture_doc_names_every_module_of_the_package():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    modules = [path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py") if path.name != "__init__.py"]
    assert len(modules) > 100  # the package was found
    missing = sorted(module for module in modules if f"`{module}`" not in doc)
    assert not missing, f"docs/architecture.md does not name {len(missing)} modules, e.g. {missing[:5]}"
