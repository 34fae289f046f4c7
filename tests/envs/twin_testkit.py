"""What the training-twin tests share: the tiny site and a batch of short staggered tariff episodes on it."""

from __future__ import annotations

from pathlib import Path

TINY = str(Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml")
# 3 envs of 10-h episodes from staggered starts: a few steps cross episode ends and partial resets
OPTIONS = {"num_envs": 3, "start": "staggered", "episode_hours": 10, "layout": "fleet", "objective": "tariff"}
