"""The package as a dependency of another project: compatible ranges in pyproject, exact versions in the locks.

Why: exact pins in ``pyproject.toml`` forced every project that installs this package onto our torch,
Lightning and every other version; the exact versions belong in ``requirements*.lock``, which the README's
commands and CI install. These tests keep the two consistent.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
EXACT_ON_PURPOSE = {"gymnasium": "CityLearn 3.0.2 requires exactly 0.28.1"}


def locked_versions() -> dict[str, str]:
    versions = {}
    for lock in ("requirements.lock", "requirements-nodeps.lock"):
        for line in (ROOT / lock).read_text().splitlines():
            if "==" in line and not line.lstrip().startswith("#"):
                name, version = line.split("#", 1)[0].strip().split("==")
                versions[canonicalize_name(name)] = version.strip()
    return versions


def project_dependencies() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in project["dependencies"]]


def test_dependencies_are_ranges_that_hold_the_locked_versions():
    locked = locked_versions()
    dependencies = project_dependencies()
    assert len(dependencies) >= 15
    for requirement in dependencies:
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{name} is not in requirements.lock"
        assert requirement.specifier.contains(locked[name]), f"{requirement} excludes the locked {locked[name]}"
        exact = [spec for spec in requirement.specifier if spec.operator in ("==", "===")]
        if name not in EXACT_ON_PURPOSE:
            assert not exact, f"{requirement}: an exact pin in pyproject pins every project that depends on this one"
            assert any(spec.operator == "<" for spec in requirement.specifier), f"{requirement}: no upper bound"
