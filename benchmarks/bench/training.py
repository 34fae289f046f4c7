"""Training throughput, ours against Stable-Baselines3, interleaved in rounds on the same env and settings.

Why rounds: each round trains a fresh agent of ours through ``fit`` and then a fresh SB3 model for
the same number of frames; the reported ratio is the median of the per-round ratios, so machine
load that drifts between rounds cancels out (see :mod:`.timing`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmarks.bench.ours import train_ours
from benchmarks.bench.sb3 import train_sb3
from benchmarks.bench.settings import IN_PROCESS, AlgorithmSettings, OurArchitecture
from benchmarks.bench.timing import interleave, median_rate, median_ratio


@dataclass
class TrainingComparison:
    settings: AlgorithmSettings
    architecture: OurArchitecture  # how ours collected and whether it compiled
    ours_frames_per_s: float
    ours_updates_per_s: float
    sb3_frames_per_s: float
    sb3_updates_per_s: float
    frames_ratio: float  # median over rounds of ours / SB3
    updates_ratio: float


def compare_training(
    settings: AlgorithmSettings,
    site: str,
    *,
    data_root: Path = Path("data"),
    rounds: int = 2,
    architecture: OurArchitecture = IN_PROCESS,
) -> TrainingComparison:
    """Ours, run as ``architecture`` says, against SB3 with as many envs in its ``DummyVecEnv`` as we have workers."""
    # lazy: stable-baselines3 is optional (the bench venv only)
    from benchmarks.bench.sb3 import make_sb3_env

    sb3_env = make_sb3_env(site, data_root, architecture.num_workers)
    results = interleave(
        {
            "ours": lambda: train_ours(settings, site, data_root, architecture),
            "sb3": lambda: train_sb3(settings, site, data_root, sb3_env),
        },
        rounds,
    )
    ours, sb3 = results["ours"], results["sb3"]
    return TrainingComparison(
        settings=settings,
        architecture=architecture,
        ours_frames_per_s=median_rate(ours, "frames"),
        ours_updates_per_s=median_rate(ours, "updates"),
        sb3_frames_per_s=median_rate(sb3, "frames"),
        sb3_updates_per_s=median_rate(sb3, "updates"),
        frames_ratio=median_ratio(ours, sb3, "frames"),
        updates_ratio=median_ratio(ours, sb3, "updates"),
    )
