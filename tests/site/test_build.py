"""The site builder: deterministic, cached by config hash, calibrated to docs/site.md."""

from __future__ import annotations

import dataclasses
import filecmp
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from iquitos_lightning.site.build import build_site, load_series, print_calibration
from iquitos_lightning.site.config import load_site_config
from iquitos_lightning.site.validate import SiteDataError

SITES = Path(__file__).resolve().parents[2] / "configs" / "site"
TINY = SITES / "tiny.yaml"
DEFAULT = SITES / "iquitos-2026.yaml"
RUNS_DATA = SITES.parents[1] / "data"  # where a run builds its site years (the profiles' data_root)


def _all_files(folder: Path) -> list[Path]:
    return sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())


def test_two_builds_of_the_same_config_are_byte_identical(tmp_path: Path) -> None:
    config = load_site_config(TINY)
    first = build_site(config, tmp_path / "a", progress=False)
    second = build_site(config, tmp_path / "b", progress=False)
    files = _all_files(first.path)
    assert files == _all_files(second.path)
    assert len(files) > 8
    _, mismatch, errors = filecmp.cmpfiles(first.path, second.path, [str(f) for f in files], shallow=False)
    assert mismatch == [] and errors == []


def test_second_build_is_read_from_cache_and_a_changed_config_rebuilds(tmp_path: Path) -> None:
    config = load_site_config(TINY)
    built = build_site(config, tmp_path / "site", progress=False)
    cached = build_site(config, tmp_path / "site", progress=False)
    assert not built.cached and cached.cached
    np.testing.assert_array_equal(cached.series.pv_kw, built.series.pv_kw)
    np.testing.assert_array_equal(cached.series.mall_kw, built.series.mall_kw)
    assert cached.series.sessions.equals(built.series.sessions)
    changed = dataclasses.replace(config, seed=config.seed + 1)
    rebuilt = build_site(changed, tmp_path / "site", progress=False)
    assert not rebuilt.cached
    assert not np.array_equal(rebuilt.series.pv_kw, built.series.pv_kw)


def test_a_read_back_folder_is_kept_by_the_process_until_one_of_its_files_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_site_config(TINY)
    build_site(config, tmp_path / "site", progress=False)
    first = build_site(config, tmp_path / "site", progress=False)  # read back, checked, kept
    with monkeypatch.context() as patched:  # unchanged files: no read
        patched.setattr("iquitos_lightning.site.build.load_series", lambda path: pytest.fail("read again"))
        again = build_site(config, tmp_path / "site", progress=False)
    assert again.cached and again.series.sessions.equals(first.series.sessions)
    again.series.pv_kw[:] = -1.0  # a caller's copy: the next read does not see it
    assert (build_site(config, tmp_path / "site", progress=False).series.pv_kw >= 0).all()
    weather = tmp_path / "site" / "weather.csv"
    weather.write_text("\n".join(weather.read_text().splitlines()[:100]) + "\n")  # cut short after the read
    with pytest.raises(SiteDataError, match=r"weather\.csv: 99 data rows"):
        build_site(config, tmp_path / "site", progress=False)


def test_tiny_site_calibration_is_sane(tmp_path: Path) -> None:
    config = load_site_config(TINY)
    result = build_site(config, tmp_path / "tiny", progress=False)
    figures = result.calibration
    assert 1300 <= figures["pv_specific_yield_kwh_kwp"] <= 1400
    assert 0.75 <= figures["pv_performance_ratio"] <= 0.85
    assert figures["annual_ghi_kwh_m2"] == pytest.approx(config.pv.annual_ghi_kwh_m2, rel=1e-3)
    assert figures["ev_energy_kwh_per_day"] == pytest.approx(config.ev.daily_energy_kwh, rel=0.15)
    series = load_series(result.path)
    assert series.hours == config.hours
    assert series.pv_kw.max() <= config.pv.ac_limit_kw
    assert (series.pv_kw[series.ghi_w_m2 == 0] == 0).all()
    assert 20 <= series.temperature_c.min() and series.temperature_c.max() <= 34
    assert 80 <= series.humidity_pct.min() and series.humidity_pct.max() <= 90


@pytest.mark.slow
def test_default_site_meets_the_site_md_targets() -> None:
    """Built where a run builds it (``data/iquitos-2026``, as the card profiles' fits in tests/agents do): whichever
    comes first on a fresh clone builds it (~8 s of CPU), the other reads it back. The building itself is tested on
    the tiny site above."""
    config = load_site_config(DEFAULT)
    figures = build_site(config, RUNS_DATA / config.name, progress=False).calibration
    assert 1300 <= figures["pv_specific_yield_kwh_kwp"] <= 1400
    assert figures["pv_performance_ratio"] == pytest.approx(0.80, abs=0.03)
    assert figures["mall_kwh"] == pytest.approx(12_368_653, rel=0.01)
    assert figures["ev_energy_kwh_per_day"] == pytest.approx(900, rel=0.15)


def test_builds_racing_for_one_folder_both_succeed_and_leave_one_whole_dataset(tmp_path: Path) -> None:
    """``compare --jobs 2`` on a fresh clone: two runs build the same missing site at once."""
    out = tmp_path / "site"
    code = (
        "import sys; from pathlib import Path; from iquitos_lightning.site.build import build_site; "
        "from iquitos_lightning.site.config import load_site_config; "
        f"build_site(load_site_config(Path({str(TINY.resolve())!r})), Path(sys.argv[1]), force=True, progress=False)"
    )
    builders = [subprocess.Popen([sys.executable, "-c", code, str(out)], stderr=subprocess.PIPE) for _ in range(3)]
    errors = [builder.communicate(timeout=300)[1].decode() for builder in builders]
    assert [builder.returncode for builder in builders] == [0, 0, 0], errors
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # no staging or old folder left behind
    cached = build_site(load_site_config(TINY), out, progress=False)
    assert cached.cached and len(_all_files(out)) > 8


def test_the_calibration_table_marks_the_figures_a_site_took_from_its_base(tmp_path: Path) -> None:
    result = build_site(load_site_config(TINY), tmp_path / "site", progress=False)
    sources = {"name": "file", "pv": "base iquitos-2026", "mall": "file", "ev": "file over base iquitos-2026"}
    console = Console(record=True, width=200)
    print_calibration(result, console, sources)
    lines = console.export_text().splitlines()
    assert "from" in next(line for line in lines if "figure" in line)
    assert "base iquitos-2026" in next(line for line in lines if "PV specific yield" in line)
    assert "file over base" in next(line for line in lines if "EV sessions" in line)
    assert "base" not in next(line for line in lines if "mall max" in line)
    plain = Console(record=True, width=200)
    print_calibration(result, plain, {"pv": "file"})  # a file without a base: no "from" column
    assert "from" not in plain.export_text()
