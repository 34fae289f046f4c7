"""Load a site profile and build (or reuse) its dataset: what both site simulators start from.

Why one function: the CityLearn env and the twin must simulate the very same built site (schema and
series); both call :func:`built_site`, so a path, a cache folder or a config object means the same to each.
"""

from __future__ import annotations

from pathlib import Path

from iquitos_lightning.site.build import BuildResult, build_site
from iquitos_lightning.site.config import SiteConfig, load_site_config


def site_config_of(site: str | Path | SiteConfig) -> SiteConfig:
    """``site`` as a :class:`SiteConfig` (a profile YAML is loaded and validated)."""
    return site if isinstance(site, SiteConfig) else load_site_config(site)


def built_site(site: str | Path | SiteConfig, data_root: Path) -> BuildResult:
    """The site's CityLearn schema and series under ``data_root/<name>``, built once and then reused (by hash)."""
    site_config = site_config_of(site)
    return build_site(site_config, Path(data_root) / site_config.name, progress=False)
