"""Where training profiles live: ``configs/`` for the card's, ``configs/experiments/<objective>/`` for the rest.

Why a lookup and not one folder: the card's profiles (``sac_cpu.yaml``, ``ppo_rtx4060.yaml``, ``smoke.yaml``) sit at
the top of ``configs/``, the experiments' profiles (``*_twin_cpu.yaml``) under the objective they train on. A
profile is still named by its file name alone (``compare --agents sac_fleet --profile tariff_twin_cpu``,
``profile: configs/sac_residual_tariff_twin_cpu.yaml`` in a search space written before the move): the file is looked
for in ``configs/`` first, then in ``configs/experiments/*/``, and must be found exactly once.
"""

from __future__ import annotations

from pathlib import Path

EXPERIMENTS = "experiments"


def profile_files(configs: Path, pattern: str) -> list[Path]:
    """The profiles in ``configs`` whose file name matches ``pattern``: top level first, then the experiments'."""
    return [*sorted(configs.glob(pattern)), *sorted(configs.glob(f"{EXPERIMENTS}/*/{pattern}"))]


def find_profile(configs: Path, name: str) -> list[Path]:
    """Every place the profile file ``name`` is: ``configs/<name>`` if it exists, else ``configs/experiments/*/<name>``
    (so one match is the profile, none or several are for the caller to refuse)."""
    top = configs / name
    return [top] if top.is_file() else sorted(configs.glob(f"{EXPERIMENTS}/*/{name}"))


def resolve_profile(path: Path) -> Path | None:
    """``path`` when it is a file, else the one profile of that file name under ``<its folder>/experiments/*/``
    (a path written before the experiments moved there); None when there is none or more than one."""
    if path.is_file():
        return path
    if not path.name:
        return None
    found = sorted(path.parent.glob(f"{EXPERIMENTS}/*/{path.name}"))
    return found[0] if len(found) == 1 else None
