"""A card-like profile on the tiny site, written to a file: what the bench tests run through the CLI in seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]


def tiny_twin_profile(path: Path, agent: str, rollout: dict[str, Any], **init_args: Any) -> Path:
    """``agent`` (A2C, PPO...) on the tiny site's twin with the card's layout and objective, 4 envs, 16x16 networks;
    ``rollout`` and ``init_args`` complete it. Returns ``path``, the profile written there."""
    config = {
        "seed_everything": 0,
        "trainer": {"accelerator": "cpu", "devices": 1, "enable_model_summary": False},
        "report": {"plots": False},  # the bench reads frames/s and bills, not the run's images
        "model": {
            "class_path": f"iquitos_lightning.agents.{agent}",
            "init_args": {
                "env": {
                    "name": "iquitos",
                    "site": "configs/site/tiny.yaml",
                    "layout": "self_consumption_window",
                    "objective": "tariff",
                    "backend": {"train": "twin", "evaluate": "twin", "num_envs": 4, "data_root": str(REPO / "data")},
                },
                "rollout": rollout,
                "hidden_sizes": [16, 16],
                **init_args,
            },  # fmt: skip
        },
    }
    path.write_text(yaml.safe_dump(config))
    return path
