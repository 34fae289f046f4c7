"""Download, here, the pinned wheels a machine without network needs to run the project over its own torch.

Why: GPU machines lent for a check, and many cluster compute nodes, have a site-provided CUDA build
of PyTorch (and often Lightning, NumPy, pandas...) but no internet. This collects, for the target's
Python version and for manylinux x86_64, exactly the pinned versions of ``requirements.lock`` and
``requirements-nodeps.lock`` that the project's direct dependencies (``pyproject.toml``) need, walking
each wheel's own ``Requires-Dist`` so nothing unused is carried; torch is never bundled (the
target's own build is used), nor what the target already has (``--have``), nor the dependencies
named in ``--without`` (and what only they need). ``scripts/install-offline.sh`` installs the result.

    bash scripts/wheelhouse.sh --python 3.12 --out wheelhouse-gpu --without pvlib,wandb \\
        --have scripts/targets/cuda-image.txt --max-mib 60

Writes ``MANIFEST.txt`` (each wheel, its size and who needs it) and ``requirements.txt`` beside the
wheels, and a wheel of the project itself. Needs the package index (it runs where pip works).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections import deque
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
NEVER_BUNDLED = {"torch"}  # the target's own (CUDA) build is what runs
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64", "linux_x86_64")  # fmt: skip


def read_pins(*lock_files: Path) -> dict[str, str]:
    """``name==version`` lines of the lock files, by canonical name."""
    pins = {}
    for lock in lock_files:
        for line in lock.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if "==" in line:
                name, version = line.split("==", 1)
                pins[canonicalize_name(name.split("[")[0])] = version.strip()
    return pins


def read_names(path: Path | None) -> set[str]:
    """Package names of a ``pip list --format=freeze`` (or one name a line) file; versions are ignored."""
    if path is None:
        return set()
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(canonicalize_name(re.split(r"[=<>~! @\[]", line, maxsplit=1)[0]))
    return names


def marker_environment(python: str) -> dict[str, str]:
    environment = default_environment()
    environment.update(
        python_version=python,
        python_full_version=f"{python}.0",
        sys_platform="linux",
        platform_system="Linux",
        platform_machine="x86_64",
        os_name="posix",
        implementation_name="cpython",
        platform_python_implementation="CPython",
    )
    return environment


def requirements_of(wheel: Path, extras: set[str], environment: dict[str, str]) -> list[Requirement]:
    """What a wheel's METADATA requires for the target (its markers evaluated, the requested extras included)."""
    with zipfile.ZipFile(wheel) as archive:
        metadata_name = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        text = archive.read(metadata_name).decode()
    needed = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        requirement = Requirement(line.split(":", 1)[1].strip())
        if requirement.marker is None or any(
            requirement.marker.evaluate({**environment, "extra": extra}) for extra in {"", *extras}
        ):
            needed.append(requirement)
    return needed


def download(pinned: list[str], python: str, out: Path) -> None:
    """``pip download`` binary wheels of ``name==version`` for CPython ``python`` on manylinux x86_64, no deps."""
    abi = "cp" + python.replace(".", "")
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--only-binary=:all:", "--python-version", python, "--implementation", "cp", "--abi", abi,
               "--abi", "abi3", "--abi", "none", "-d", str(out)]  # fmt: skip
    for platform in (*PLATFORMS, "any"):
        command += ["--platform", platform]
    subprocess.run([*command, *pinned], check=True)


def wheel_of(out: Path, name: str, version: str) -> Path:
    spelled = "[-_.]".join(re.escape(part) for part in re.split(r"[-_.]", name))  # wheels write - as _
    pattern = re.compile(rf"^{spelled}-{re.escape(version)}-", re.IGNORECASE)
    found = [path for path in out.glob("*.whl") if pattern.match(path.name)]
    if not found:
        raise SystemExit(f"wheelhouse: no wheel of {name}=={version} in {out} after download")
    return found[0]


def collect(args: argparse.Namespace) -> list[tuple[Path, str]]:
    """Breadth-first over the direct dependencies: download each pinned wheel, then what it requires."""
    pins = read_pins(ROOT / "requirements.lock", ROOT / "requirements-nodeps.lock")
    no_deps = set(read_pins(ROOT / "requirements-nodeps.lock"))
    without = {canonicalize_name(name) for name in args.without.split(",") if name}
    have = read_names(args.have) - {canonicalize_name(name) for name in args.keep.split(",") if name}
    environment = marker_environment(args.python)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    roots = [Requirement(text) for text in project["dependencies"]] + [Requirement(f"{n}=={pins[n]}") for n in no_deps]
    queue = deque((requirement, "pyproject.toml") for requirement in roots)
    seen: dict[str, str] = {}
    while queue:
        level = []
        while queue:
            requirement, needed_by = queue.popleft()
            name = canonicalize_name(requirement.name)
            if name in NEVER_BUNDLED | without | have or name in seen:
                continue
            if name not in pins:
                raise SystemExit(f"wheelhouse: {name} (needed by {needed_by}) is not pinned in requirements.lock")
            seen[name] = needed_by
            level.append((name, set(requirement.extras)))
        if not level:
            break
        download([f"{name}=={pins[name]}" for name, _ in level], args.python, args.out)
        for name, extras in level:
            if name in no_deps:
                continue
            for requirement in requirements_of(wheel_of(args.out, name, pins[name]), extras, environment):
                queue.append((requirement, name))
    return [(wheel_of(args.out, name, pins[name]), needed_by) for name, needed_by in seen.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="the target's Python version, e.g. 3.12")
    parser.add_argument("--out", type=Path, required=True, help="folder for the wheels (created)")
    parser.add_argument("--without", default="", help="comma-separated dependencies to leave out, e.g. pvlib,wandb")
    parser.add_argument("--have", type=Path, default=None, help="`pip list --format=freeze` of the target: skipped")
    parser.add_argument("--keep", default="", help="bundle these even if the target has them (default: none; "
                        "the GPU image's SciPy needs its own numpy 2, see docs/performance.md)")  # fmt: skip
    parser.add_argument("--max-mib", type=float, default=None, help="fail if the bundle is larger")
    args = parser.parse_args()
    if not re.fullmatch(r"3\.\d+", args.python):
        parser.error(f"--python {args.python!r}: give major.minor, e.g. 3.12")
    args.out.mkdir(parents=True, exist_ok=True)
    for stale in args.out.glob("*.whl"):
        stale.unlink()
    wheels = collect(args)
    had_build_folder = (ROOT / "build").exists()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--no-build-isolation", "-w", str(args.out), str(ROOT)], check=True)  # fmt: skip
    if not had_build_folder:  # setuptools leaves build/ in the source tree
        shutil.rmtree(ROOT / "build", ignore_errors=True)
    project_wheel = next(args.out.glob("iquitos_lightning-*.whl"))
    wheels.append((project_wheel, "the project itself"))
    total = sum(path.stat().st_size for path, _ in wheels)
    lines = [f"{path.name}\t{path.stat().st_size / 2**20:.2f} MiB\tneeded by {why}" for path, why in sorted(wheels)]
    summary = f"{len(wheels)} wheels, {total / 2**20:.1f} MiB, for CPython {args.python} manylinux x86_64"
    (args.out / "MANIFEST.txt").write_text("\n".join([summary, *lines]) + "\n")
    (args.out / "requirements.txt").write_text("\n".join(path.name for path, _ in sorted(wheels)) + "\n")
    print("\n".join(lines))
    print(f"wheelhouse: {summary} in {args.out}")
    if args.max_mib is not None and total > args.max_mib * 2**20:
        print(f"wheelhouse: {total / 2**20:.1f} MiB is over --max-mib {args.max_mib:g}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
