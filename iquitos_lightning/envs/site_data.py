"""Load a site profile and build (or reuse) its dataset: what both site simulators start from.

Why one function: the CityLearn env and the twin must simulate the very same built site (schema and
series); both call :func:`built_site`, so a path, a cache folder or a config object means the same to each.
A training twin's build reads the site and its training years once (:class:`LoadedSite`) and hands them on: to
the reference runs above the env (control/training_references.py) and to the twin (envs/factory.py ``make_env``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from iquitos_lightning.site.build import BuildResult, build_site
from iquitos_lightning.site.config import SiteConfig, load_site_config
from iquitos_lightning.site.series import SiteSeries


def site_config_of(site: str | Path | SiteConfig) -> SiteConfig:
    """``site`` as a :class:`SiteConfig` (a profile YAML is loaded and validated)."""
    return site if isinstance(site, SiteConfig) else load_site_config(site)


def built_site(site: str | Path | SiteConfig, data_root: Path) -> BuildResult:
    """The site's CityLearn schema and series under ``data_root/<name>``, built once and then reused (by hash)."""
    site_config = site_config_of(site)
    return build_site(site_config, Path(data_root) / site_config.name, progress=False)


def site_year(site: str | Path | SiteConfig, seed: int) -> SiteConfig:
    """The site profile with its series drawn from ``seed``: another year of the same statistics (mall noise,
    cloudiness, EV sessions drawn afresh; calendar, plant and tariff unchanged), named ``<name>-seed<seed>``."""
    config = site_config_of(site)
    if seed == config.seed:
        return config
    # a year's own profile file (configs/site/test-years/) is named <name>-seed<its seed>: its other years are the
    # base profile's, and are built once under the same names
    base = re.sub(r"-seed\d+$", "", config.name)
    return dataclasses.replace(config, name=f"{base}-seed{seed}", seed=seed)


def site_years(site: str | Path | SiteConfig, seeds: Sequence[int], data_root: Path) -> list[SiteSeries]:
    """The built series of ``site``'s years drawn from ``seeds`` (:func:`site_year`), each built once under
    ``data_root`` and then read back: the training years of a multi-year twin."""
    return [built_site(site_year(site, seed), data_root).series for seed in seeds]


@dataclass(frozen=True)
class LoadedSite:
    """A site profile built (or reused) and read back once, with the years a training twin stacks: what each step
    of one env build reads instead of loading the site again."""

    build: BuildResult
    years: tuple[SiteSeries, ...] = ()  # the training years; none: the twin trains on the site's own year

    @property
    def schema_path(self) -> Path:
        return self.build.schema_path

    @property
    def series(self) -> SiteSeries:
        return self.build.series

    @property
    def training_series(self) -> list[SiteSeries]:
        """The years a training episode may run in: the training years, else the site's own."""
        return list(self.years) or [self.build.series]


def load_site(site: str | Path | SiteConfig, data_root: Path, train_seeds: Sequence[int] | None = None) -> LoadedSite:
    """``site`` built under ``data_root`` and its years drawn from ``train_seeds`` (:func:`site_years`), each read
    and checked once."""
    return LoadedSite(built_site(site, data_root), tuple(site_years(site, train_seeds or (), data_root)))
