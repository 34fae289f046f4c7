"""Site configuration: profiles load, bad values are refused with the field named."""

import dataclasses
from pathlib import Path

import pytest

from iquitos_lightning.site.config import SiteConfig, SiteConfigError, load_site_config, section_sources

REPO_SITES = Path(__file__).resolve().parents[2] / "configs" / "site"

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "site"


@pytest.mark.parametrize("profile", ["iquitos-2026", "iquitos-38", "tiny"])
def test_shipped_profiles_load(profile: str) -> None:
    config = load_site_config(CONFIGS / f"{profile}.yaml")
    assert config.name == profile


def test_default_profile_matches_site_card() -> None:
    config = load_site_config(CONFIGS / "iquitos-2026.yaml")
    assert config.ev.socket_count == 128
    assert [f.sockets for f in config.ev.fleets] == [112, 16]
    assert config.bess.capacity_kwh == 4520 and config.bess.power_kw == 2712
    assert config.pv.dc_kwp == 4162 and config.pv.ac_limit_kw == 3201
    assert config.grid.carbon_intensity_kg_per_kwh == pytest.approx(0.4521)
    assert config.hours == 8760
    assert config.grid.import_limit_kw == 3500.0  # the profile's assumed connection; the dataclass has none
    assert config == SiteConfig(grid=dataclasses.replace(SiteConfig().grid, import_limit_kw=3500.0))


def test_38_socket_profile() -> None:
    config = load_site_config(CONFIGS / "iquitos-38.yaml")
    assert config.ev.socket_count == 38
    assert config.bess.round_trip_efficiency == pytest.approx(0.95)


@pytest.mark.parametrize(
    ("yaml_text", "field_named"),
    [
        ("bess:\n  capacity_kwh: -5\n", "bess.capacity_kwh"),
        ("bess:\n  initial_soc: 1.5\n", "bess.initial_soc"),
        ("bess:\n  soc_min: 0.9\n  soc_max: 0.5\n", "bess.soc_min"),
        ("ev:\n  open_hour: 23\n  close_hour: 22\n", "ev.open_hour"),
        ("ev:\n  arrival_soc_mean: -0.1\n", "ev.arrival_soc_mean"),
        ("pv:\n  monthly_shape_mwh: [1, 2, 3]\n", "pv.monthly_shape_mwh"),
        ("grid:\n  carbon_intensity_kg_per_kwh: 452.1\n", "grid.carbon_intensity_kg_per_kwh"),
        ("calendar:\n  days: 400\n", "calendar.days"),
        ("bogus_key: 1\n", "bogus_key"),
        ("calendar:\n  days: many\n", "calendar.days"),
    ],
)
def test_bad_values_are_refused_naming_the_field(tmp_path: Path, yaml_text: str, field_named: str) -> None:
    path = tmp_path / "site.yaml"
    path.write_text(f"base: {REPO_SITES / 'iquitos-2026.yaml'}\n{yaml_text}")  # one bad section over a full site
    with pytest.raises(SiteConfigError, match=field_named.replace(".", r"\.")):
        load_site_config(path)


def test_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SiteConfigError, match="not found"):
        load_site_config(tmp_path / "nope.yaml")


def test_content_hash_tracks_every_field() -> None:
    base = SiteConfig()
    assert base.content_hash() == SiteConfig().content_hash()
    changed = SiteConfig(seed=base.seed + 1)
    assert changed.content_hash() != base.content_hash()


def test_a_site_file_missing_sections_is_refused_naming_them(tmp_path):
    cut = tmp_path / "cut.yaml"  # the tiny site cut after its pv section: it must not become another site
    text = (REPO_SITES / "tiny.yaml").read_text()
    cut.write_text(text[: text.index("\nweather:")] + "\n")
    with pytest.raises(SiteConfigError, match=r"section 'weather' is missing \(and mall, ev, bess, grid\)"):
        load_site_config(cut)
    only_name = tmp_path / "x.yaml"
    only_name.write_text("name: x\n")
    with pytest.raises(SiteConfigError, match="section 'seed' is missing.*base: iquitos-2026"):
        load_site_config(only_name)


def test_a_site_file_with_a_base_inherits_the_sections_it_leaves_out(tmp_path):
    for name in ("tiny.yaml",):
        (tmp_path / name).write_text((REPO_SITES / name).read_text())
    longer = tmp_path / "tiny-longer.yaml"
    longer.write_text("base: tiny\nname: tiny-longer\ncalendar: {days: 14}\n")
    site = load_site_config(longer)
    tiny = load_site_config(REPO_SITES / "tiny.yaml")
    assert site.name == "tiny-longer" and site.calendar.days == 14
    assert site.calendar.year == tiny.calendar.year  # the rest of a written section comes from the base too
    assert site.ev == tiny.ev and site.pv == tiny.pv
    looping = tmp_path / "loop.yaml"
    looping.write_text("base: loop\n")
    with pytest.raises(SiteConfigError, match="loops back"):
        load_site_config(looping)


def test_section_sources_say_which_sections_a_file_decided_and_which_came_from_its_base(tmp_path):
    longer = tmp_path / "tiny-longer.yaml"
    longer.write_text("base: tiny\nname: tiny-longer\ncalendar: {days: 14}\n")
    sources = section_sources(longer)
    assert sources["name"] == "file"
    assert sources["calendar"] == "file over base tiny"  # days written, year inherited
    assert sources["ev"] == sources["pv"] == sources["mall"] == "base tiny"
    assert set(section_sources(REPO_SITES / "tiny.yaml").values()) == {"file"}


def test_a_site_file_parsed_again_gives_a_copy_and_an_edited_file_its_new_values(tmp_path: Path) -> None:
    """load_site_config keeps each checked mapping per process (a fit loads its profile about twelve times)."""
    site = tmp_path / "site.yaml"
    site.write_text((REPO_SITES / "tiny.yaml").read_text())
    first = load_site_config(site)
    first.name = "changed by a caller"
    assert load_site_config(site).name == "tiny"  # the caller's change stays with its copy
    site.write_text(site.read_text().replace("name: tiny", "name: edited"))
    assert load_site_config(site).name == "edited"
