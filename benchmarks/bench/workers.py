"""Collection throughput against the number of environment workers (``EnvConfig.num_workers``).

Why the collector alone: this isolates what parallel workers buy (env steps in other processes)
from learning. Every worker count keeps its own collector alive and the counts take turns, one
rollout each per round, so a change of machine load hits them all alike. The policy is TorchRL's
random policy: the same for every count, and no network in the way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmarks.bench.timing import Rate, interleave, median_rate, timed
from iquitos_lightning.envs.env_config import Backend


@dataclass
class WorkerScaling:
    workers: int
    frames_per_s: float
    speedup: float  # frames/s over the 1-worker frames/s


def measure_worker_scaling(
    site: str, worker_counts: list[int], *, data_root: Path = Path("data"), frames_per_worker: int = 50, rounds: int = 3
) -> list[WorkerScaling]:
    # lazy: collectors and envs (TorchRL, CityLearn) load only when this section runs
    from iquitos_lightning.agents.collection import make_collector, shutdown_workers
    from iquitos_lightning.envs.env_config import EnvConfig
    from iquitos_lightning.envs.factory import make_env

    collectors = {}
    iterators = {}
    for workers in worker_counts:
        config = EnvConfig(site=site, backend=Backend(num_workers=workers, data_root=str(data_root)))
        frames = workers * frames_per_worker
        collectors[workers] = make_collector(config, make_env(config), None, frames_per_batch=frames, overlap=False)
        iterators[workers] = iter(collectors[workers])
        next(iterators[workers])  # warm-up: starts the worker processes

    def runner(workers: int):
        def run() -> dict[str, float]:
            batch = next(iterators[workers])
            return {"frames": batch.numel()}

        return lambda: timed(run)

    try:
        results: dict[str, list[Rate]] = interleave({str(n): runner(n) for n in worker_counts}, rounds)
    finally:
        for collector in collectors.values():
            shutdown_workers(collector)
    rates = {n: median_rate(results[str(n)], "frames") for n in worker_counts}
    base = rates[worker_counts[0]]
    return [WorkerScaling(n, rates[n], rates[n] / base) for n in worker_counts]
