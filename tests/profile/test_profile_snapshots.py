"""Every training profile at the top of ``configs/`` resolves to the config committed in ``snapshots/<profile>.yaml``.

Why: a profile's layout (a base per agent, short overlays per card) may change; what a run gets from it must not.
``fit --config <profile> --print_config`` is the resolved config as jsonargparse parses it (defaults included);
``written_keys.yaml`` holds the keys each profile writes (the auto profile fills only the others:
:mod:`iquitos_lightning.profile.explicit_settings`), so both what is set and who set it are compared.
Stripped from the printed config: its first line, ``# lightning.pytorch==<version>`` (the installed version, not the
profile's). An intended change of a profile's values is written again with
``IQUITOS_WRITE_SNAPSHOTS=1 pytest tests/profile/test_profile_snapshots.py -n0``, and the diff reviewed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from iquitos_lightning.cli import run_lightning_cli
from iquitos_lightning.profile.explicit_settings import explicit_keys

REPO = Path(__file__).resolve().parents[2]
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
WRITTEN_KEYS = SNAPSHOTS / "written_keys.yaml"
PROFILES = sorted(path.stem for path in (REPO / "configs").glob("*.yaml"))
WRITE = os.environ.get("IQUITOS_WRITE_SNAPSHOTS") == "1"
VERSION_LINE = "# lightning.pytorch=="


def printed_config(profile: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``fit --config configs/<profile>.yaml --print_config`` without the installed Lightning's version line."""
    capsys.readouterr()
    assert run_lightning_cli(["fit", "--config", f"configs/{profile}.yaml", "--print_config"]) == 0
    lines = capsys.readouterr().out.splitlines(keepends=True)
    return "".join(line for line in lines if not line.startswith(VERSION_LINE))


def test_the_card_profiles_are_all_snapshotted() -> None:
    card = {f"{agent}_{device}" for agent in ("sac", "ppo", "a2c") for device in ("cpu", "rtx4060", "auto")}
    assert card | {"sac_per_socket_cpu", "smoke"} <= set(PROFILES)


@pytest.mark.parametrize("profile", PROFILES)
def test_a_profile_resolves_to_its_snapshot(profile: str, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.chdir(REPO)  # configs name their site relative to the repository, as a user's command does
    printed = printed_config(profile, capsys)
    snapshot = SNAPSHOTS / f"{profile}.yaml"
    if WRITE:
        snapshot.write_text(printed)
    assert printed == snapshot.read_text(), f"configs/{profile}.yaml no longer resolves to {snapshot.name}"


def test_each_profile_writes_the_keys_of_its_snapshot(monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    written = {profile: sorted(explicit_keys(["fit", "--config", f"configs/{profile}.yaml"])) for profile in PROFILES}
    if WRITE:
        WRITTEN_KEYS.write_text(yaml.safe_dump(written, sort_keys=True))
    assert written == yaml.safe_load(WRITTEN_KEYS.read_text())
