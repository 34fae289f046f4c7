"""Peak process memory (and peak VRAM on CUDA) against replay buffer capacity, one fresh process per point.

Why a process per point: peak resident memory (``VmHWM``) is a high-water mark of the whole
process, so each capacity and storage needs its own process. Each one trains SAC on the given site for a few rollouts
through ``fit`` (the buffer's storage is created at its first write) and reports its peak resident
memory and, on CUDA, ``torch.cuda.max_memory_allocated``. The buffer is host-side by design:
VRAM must not move with capacity. ``memory`` storage is a tensor in RAM (pages count once written);
``memmap`` storage is a file, so resident memory should stay flat as capacity grows.

Run alone: ``python -m benchmarks.bench.memory --capacity 100000 --storage memmap``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.bench.trainer import bare_trainer

STORAGES = ("memory", "memmap")


@dataclass
class MemoryPoint:
    storage: str
    capacity: int
    peak_rss_mib: float
    peak_vram_mib: float | None  # None without CUDA
    buffer_full_size_mib: float  # capacity x bytes per transition (what a full buffer would take)


def _probe(site: str, data_root: str, capacity: int, storage: str, frames: int) -> dict[str, float | None]:
    """Run inside the child: fit SAC for ``frames`` frames and report peak memory."""
    # lazy: the probe runs in a child process, whose peak memory includes what it imports here
    import torch

    from benchmarks.bench.timing import peak_rss_bytes
    from iquitos_lightning.agents import SAC, EnvConfig, ReplayBufferConfig, RolloutConfig
    from iquitos_lightning.agents.replay import bytes_per_transition
    from iquitos_lightning.envs.env_config import Backend

    torch.set_num_threads(1)
    rollout = max(frames // 4, 1)
    budget = rollout * 4
    with tempfile.TemporaryDirectory(prefix="bench-memmap-") as scratch:
        agent = SAC(
            env=EnvConfig(site=site, backend=Backend(data_root=data_root)),
            rollout=RolloutConfig(
                frame_budget=budget, frames_per_batch=rollout, eval_every_frames=budget, eval_episodes=0
            ),
            buffer=ReplayBufferConfig(
                capacity=capacity, storage=storage, memmap_dir=scratch if storage == "memmap" else None
            ),
            hidden_sizes=(64, 64),
            batch_size=64,
            init_random_frames=rollout,
            updates_per_frame=0.25,
        )
        cuda = torch.cuda.is_available()
        trainer = bare_trainer()
        trainer.fit(agent)
        per_transition = bytes_per_transition(agent.train_env.fake_tensordict(), agent.stored_keys())  # what it keeps
        return {
            "peak_rss_mib": peak_rss_bytes() / 2**20,
            "peak_vram_mib": torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
            "buffer_full_size_mib": capacity * per_transition / 2**20,
        }


def measure_memory(
    site: str,
    capacities: list[int],
    storages: tuple[str, ...] = STORAGES,
    *,
    data_root: Path = Path("data"),
    frames: int = 200,
) -> list[MemoryPoint]:
    """One child process per (storage, capacity); returns their peaks."""
    points = []
    for storage in storages:
        for capacity in capacities:
            command = [
                sys.executable,
                "-m",
                "benchmarks.bench.memory",
                "--site",
                site,
                "--data-root",
                str(data_root),
            ]
            command += ["--capacity", str(capacity), "--storage", storage, "--frames", str(frames)]
            result = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy(), check=False)
            if result.returncode != 0:
                raise RuntimeError(f"memory probe {storage}/{capacity} failed:\n{result.stderr[-2000:]}")
            values = json.loads(result.stdout.strip().splitlines()[-1])
            points.append(MemoryPoint(storage=storage, capacity=capacity, **values))
    return points


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench.memory", description=__doc__)
    parser.add_argument("--site", default="configs/site/tiny.yaml")
    parser.add_argument("--data-root", default="data")
    parser.add_argument("--capacity", type=int, required=True)
    parser.add_argument("--storage", choices=STORAGES, default="memmap")
    parser.add_argument("--frames", type=int, default=200)
    args = parser.parse_args(argv)
    print(json.dumps(_probe(args.site, args.data_root, args.capacity, args.storage, args.frames)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
