"""A site's reference table on disk (``results/<site>/baselines.json``): its version and whether it is current.

Why: the ``baselines`` command (experiments/baselines.py) writes the file, and training reads it to say how much of
the rule-to-optimum gap a run closes (training/reference_gap.py). The reader sits here, below both, so that training
needs neither the command nor CityLearn to know whether the file was made for this site config and these references.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iquitos_lightning.site.config import SiteConfig

# Bumped when the references change (2: tariff_rule and mpc_forecast plan with the shared past-days forecasts of
# site/forecasts.py; 3: the mpc_robust_tariff row; 4: mpc_robust starts the year from the last days of the year
# before): a baselines.json of another version is made again by ``compare``.
REFERENCES_VERSION = 4


def current_references(results_root: Path, site_config: SiteConfig) -> dict[str, Any] | None:
    """``results/<site>/baselines.json`` when it was made for this exact site config and references version, else
    None (missing or stale: run ``baselines`` again). The one reader of that file's validity."""
    path = Path(results_root) / site_config.name / "baselines.json"
    if not path.is_file():
        return None
    made = json.loads(path.read_text())
    current = made.get("site_config_hash") == site_config.content_hash()
    return made if current and made.get("references_version") == REFERENCES_VERSION else None
