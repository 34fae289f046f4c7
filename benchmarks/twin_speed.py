"""Measure the twin against CityLearn on this machine: steps per second, long equivalence runs, training frames per
second; run as a script, it prints the rows (JSON lines) as they come.

    python benchmarks/twin_speed.py speed [--site configs/site/iquitos-2026.yaml]
    python benchmarks/twin_speed.py equivalence --steps 3000
    python benchmarks/twin_speed.py training --algorithm PPO --num-envs 64 --frames 1000000 [--evaluate]

``speed``: env steps/s of the twin at B = 1, 16, 256, 1024 against CityLearn; ``equivalence``: the
long version of the CI equivalence test (CityLearn's first N hours with random, uncontrolled and
rule-based actions replayed on the twin); ``training``: frames/s of PPO/A2C on many twin envs and,
with ``--evaluate``, the trained policy run on CityLearn and on the twin (same KPIs expected).
Torch runs on one thread by default: on a busy 2-core machine two OpenMP threads spin against
each other and the batched twin gets 5 to 6 times slower (measured: 136k vs 23k steps/s).

Why plain functions returning rows: the script prints them, and a caller (a test, the ``bench`` command) can
import :func:`twin_speed_table` (and the others) and render the rows its own way. Every timing is wall-clock on
this machine with whatever else runs on it: compare rows of one call, never rows of different calls. The caller
chooses torch's thread count (the script uses one). Rates are given per wall-clock second and per second of this
process's CPU time (``*_cpu``): on a machine shared with other jobs the CPU-time rate is the one that says what
the code costs (with one torch thread it is the single-core rate).

What is timed:
- CityLearn: :class:`~iquitos_lightning.envs.citylearn.IquitosEnv` ``step`` (the Gymnasium env,
  without TorchRL's wrapper, i.e. CityLearn at its cheapest), random actions;
- twin: :class:`~iquitos_lightning.envs.twin.IquitosTwin` ``step`` through TorchRL's
  ``EnvBase.step`` (what a collector calls), random actions, counted as B env steps per call.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from tensordict import TensorDict

from iquitos_lightning.envs.env_config import Backend
from iquitos_lightning.envs.twin import IquitosTwin, make_twin

DEFAULT_SITE = "configs/site/iquitos-2026.yaml"
BATCH_SIZES = (1, 16, 256, 1024)


def citylearn_steps_per_second(
    site: str | Path, data_root: Path, steps: int = 50, seed: int = 0
) -> tuple[float, float]:
    """CityLearn's Gymnasium env: steps per wall second and per CPU second over ``steps`` random steps."""
    # lazy: each measurement loads only the simulators and agents it runs (CityLearn, torch, Lightning)
    from iquitos_lightning.envs.citylearn import make_iquitos_env

    env = make_iquitos_env(site, data_root=data_root)
    rng = np.random.default_rng(seed)
    env.reset()
    steps = min(steps, env.hours - 1)
    actions = rng.uniform(-1.0, 1.0, (steps + 1, env.action_space.shape[0])).astype(np.float32)
    env.step(actions[0])
    started, cpu = time.perf_counter(), time.process_time()
    for action in actions[1:]:
        env.step(action)
    return steps / (time.perf_counter() - started), steps / (time.process_time() - cpu)


def twin_steps_per_second(
    twin: IquitosTwin, seconds: float = 2.0, seed: int = 0, *, torchrl: bool = True
) -> tuple[float, float]:
    """Env steps (B per call) per wall and per CPU second, random actions, for about ``seconds``.

    ``torchrl``: time ``twin.step`` (TorchRL's ``EnvBase.step`` around the physics, what a
    collector calls); otherwise the physics alone (:meth:`IquitosTwin._simulate` and the state
    update), the level of CityLearn's own ``step``.
    """
    generator = torch.Generator(device=twin.device).manual_seed(seed)
    shape = twin.action_spec.shape
    actions = [torch.rand(shape, generator=generator, device=twin.device) * 2 - 1 for _ in range(16)]

    def step(action: torch.Tensor) -> None:
        if torchrl:
            twin.step(TensorDict({"action": action}, batch_size=twin.batch_size))
        else:
            state = twin._state
            state.t, state.soc, state.capacity, state.peak, *_, state.bands = twin._simulate(
                state.t, state.soc, state.capacity, state.peak, action, state.bands
            )

    twin.reset()
    step(actions[0])  # warm-up (compiles if asked)
    twin.reset()
    calls, started, cpu = 0, time.perf_counter(), time.process_time()
    while True:
        if int(twin._state.t.max()) >= twin.hours:
            twin.reset()
        step(actions[calls % len(actions)])
        calls += 1
        elapsed = time.perf_counter() - started
        if calls >= 5 and elapsed >= seconds:
            return calls * twin.num_envs / elapsed, calls * twin.num_envs / (time.process_time() - cpu)


def twin_speed_table(
    site: str | Path = DEFAULT_SITE,
    data_root: Path = Path("data"),
    batch_sizes: tuple[int, ...] = BATCH_SIZES,
    *,
    citylearn_steps: int = 50,
    seconds: float = 2.0,
    compile: bool = False,
    physics_only: bool = False,
) -> list[dict[str, Any]]:
    """One row for CityLearn and one per twin batch size: env steps per second and speed-up over CityLearn.

    ``compile``: also time the compiled twin (``IquitosTwin(compile_physics=True)``; about a minute of
    compilation per batch size, not counted). ``physics_only``: also time the twin's physics
    without TorchRL's ``EnvBase.step`` around it (rows ``*_physics``).
    """
    wall, cpu = citylearn_steps_per_second(site, Path(data_root), citylearn_steps)
    name = Path(site).stem
    rows = [
        {"site": name, "simulator": "citylearn", "num_envs": 1, "steps_per_s": wall, "steps_per_cpu_s": cpu}
        | {"speedup": 1.0, "speedup_cpu": 1.0}
    ]
    for compiled in (False, True) if compile else (False,):
        for envs in batch_sizes:
            twin = make_twin(site, data_root=Path(data_root), num_envs=envs, compile_physics=compiled)
            for torchrl in (True, False) if physics_only else (True,):
                twin_wall, twin_cpu = twin_steps_per_second(twin, seconds, torchrl=torchrl)
                simulator = "twin" + ("_compiled" if compiled else "") + ("" if torchrl else "_physics")
                rows.append(
                    {"site": name, "simulator": simulator, "num_envs": envs}
                    | {"steps_per_s": twin_wall, "steps_per_cpu_s": twin_cpu}
                    | {"speedup": twin_wall / wall, "speedup_cpu": twin_cpu / cpu}
                )
    return rows


def long_equivalence(
    site: str | Path = DEFAULT_SITE,
    data_root: Path = Path("data"),
    steps: int = 2000,
    sources: tuple[str, ...] = ("random", "uncontrolled", "rule_based"),
    compile_physics: bool = False,
) -> list[dict[str, Any]]:
    """CityLearn's first ``steps`` hours with each action source, replayed on one batched twin: largest errors.

    ``compile_physics``: replay on the compiled twin (checks that compiling changes nothing).
    """
    # lazy: each measurement loads only the simulators and agents it runs (CityLearn, torch, Lightning)
    from benchmarks.bench.equivalence import citylearn_trajectory, compare, twin_trajectories
    from iquitos_lightning.control.references import RuleBasedController, UncontrolledController
    from iquitos_lightning.envs.citylearn import make_iquitos_env

    env = make_iquitos_env(site, data_root=Path(data_root))
    rng = np.random.default_rng(0)
    controllers = {
        "uncontrolled": UncontrolledController(env.site_config),
        "rule_based": RuleBasedController(env.site_config),
    }
    references = []
    for source in sources:
        started = time.perf_counter()
        if source == "random":
            reference = citylearn_trajectory(env, lambda obs, state: rng.uniform(-1, 1, 1 + env.sockets), steps)
        else:
            reference = citylearn_trajectory(env, lambda obs, state, c=controllers[source]: c.act(state), steps)
        references.append((source, reference, time.perf_counter() - started))
    twin = IquitosTwin(
        env.schema_path, env.series, num_envs=len(references), record=True, compile_physics=compile_physics
    )
    started = time.perf_counter()
    replays = twin_trajectories(twin, np.stack([reference.actions for _, reference, _ in references]))
    twin_seconds = time.perf_counter() - started
    return [
        {
            "site": Path(site).stem,
            "twin": "compiled" if compile_physics else "eager",
            "actions": source,
            "steps": len(reference.rewards),
            **{f"max_rel_error_{key}": value for key, value in compare(reference, replay).items()},
            "citylearn_s": seconds,
            "twin_s_all_sources": twin_seconds,
        }
        for (source, reference, seconds), replay in zip(references, replays, strict=True)
    ]


def training_speed(
    agent: str = "PPO",
    site: str | Path = DEFAULT_SITE,
    data_root: Path = Path("data"),
    num_envs: int = 64,
    frames: int = 65_536,
    rollout_steps: int = 128,
    compile: bool = False,
    **agent_kwargs: Any,
) -> dict[str, Any]:
    """Train ``agent`` ("PPO" or "A2C") on ``num_envs`` twin envs for ``frames`` frames, no evaluation: frames/s.

    Returns the row and keeps the trained agent under the ``"agent"`` key (for a CityLearn evaluation).
    """
    # lazy: each measurement loads only the simulators and agents it runs (CityLearn, torch, Lightning)
    from iquitos_lightning.agents import A2C, PPO, EnvConfig, RolloutConfig

    agent_class = {"PPO": PPO, "A2C": A2C}[agent]
    frames_per_batch = num_envs * rollout_steps
    budget = -(-frames // frames_per_batch) * frames_per_batch
    model = agent_class(
        env=EnvConfig(
            site=str(site),
            backend=Backend(train="twin", num_envs=num_envs, compile=compile, data_root=str(data_root)),
        ),
        rollout=RolloutConfig(
            frame_budget=budget, frames_per_batch=frames_per_batch, eval_every_frames=budget, eval_episodes=0
        ),
        **agent_kwargs,
    )
    trainer = pl.Trainer(
        accelerator="cpu",
        max_epochs=-1,
        num_sanity_val_steps=0,
        logger=False,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    )
    started, cpu = time.perf_counter(), time.process_time()
    trainer.fit(model)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
    return {
        "agent": model,
        "algorithm": agent,
        "site": Path(site).stem,
        "num_envs": num_envs,
        "frames": model.frames_done,
        "updates": model.updates_done,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "frames_per_s": model.frames_done / seconds,
        "frames_per_cpu_s": model.frames_done / cpu_seconds,
        "last_episode_return": model.last_episode_return,
    }


def policy_on_both(
    actor: Any, site: str | Path = DEFAULT_SITE, data_root: Path = Path("data"), steps: int | None = None
) -> dict:
    """Run ``actor`` deterministically, closed loop, on CityLearn and on the twin: KPIs of both and largest errors.

    Each simulator feeds the policy its own observations, so this checks the whole loop, not a replay.
    """
    # lazy: each measurement loads only the simulators and agents it runs (CityLearn, torch, Lightning)
    from torchrl.envs import ExplorationType, set_exploration_type

    from benchmarks.bench.equivalence import kpi_relative_differences, max_relative_error
    from iquitos_lightning.envs.env_config import EnvConfig
    from iquitos_lightning.envs.factory import make_env, site_env
    from iquitos_lightning.metrics.kpis import compute_kpis

    config = EnvConfig(site=str(site), backend=Backend(data_root=str(data_root)))
    citylearn_env = make_env(config, evaluation=True)
    twin = make_twin(site, data_root=Path(data_root), record=True)
    steps = twin.hours if steps is None else min(steps, twin.hours)
    timings, rollouts = {}, {}
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        for name, env in (("twin", twin), ("citylearn", citylearn_env)):
            started = time.perf_counter()
            rollouts[name] = env.rollout(steps, actor, break_when_any_done=True).reshape(-1)
            timings[name] = time.perf_counter() - started
    inner = site_env(citylearn_env)
    kpis = {
        "citylearn": compute_kpis(inner.flows(), inner.departures(), inner.site_config),
        "twin": compute_kpis(twin.flows(), twin.departures(), twin.site_config),
    }
    differences = kpi_relative_differences(kpis["citylearn"], kpis["twin"])
    differences.pop("energy_balance_max_error_kw")
    return {
        "steps": steps,
        "max_rel_error_observation": max_relative_error(
            rollouts["citylearn"]["next", "observation"].numpy(), rollouts["twin"]["next", "observation"].numpy()
        ),
        "max_rel_error_reward": max_relative_error(
            rollouts["citylearn"]["next", "reward"].numpy(), rollouts["twin"]["next", "reward"].numpy()
        ),
        "max_kpi_rel_difference": max(differences.values()),
        "kpis_citylearn": kpis["citylearn"],
        "kpis_twin": kpis["twin"],
        "citylearn_s": timings["citylearn"],
        "twin_s": timings["twin"],
    }


def _print(row: dict) -> None:
    print(json.dumps({key: value for key, value in row.items() if key != "agent"}, default=float), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("speed", "equivalence", "training"))
    parser.add_argument("--site", default="configs/site/iquitos-2026.yaml")
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES))
    parser.add_argument("--citylearn-steps", type=int, default=50)
    parser.add_argument("--steps", type=int, default=3000, help="equivalence: hours of CityLearn per action source")
    parser.add_argument("--algorithm", choices=("PPO", "A2C"), default="PPO")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--rollout-steps", type=int, default=128, help="training: steps per env per rollout")
    parser.add_argument("--evaluate", action="store_true", help="training: run the policy on CityLearn and the twin")
    parser.add_argument("--eval-steps", type=int, default=None, help="training: hours of that evaluation (all)")
    parser.add_argument("--compile", action="store_true", help="also time / train the compiled twin")
    parser.add_argument("--physics-only", action="store_true", help="speed: also time the physics without TorchRL")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (1: best on a shared 2-core box)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.what == "speed":
        rows = twin_speed_table(
            args.site,
            args.data_root,
            tuple(args.batch_sizes),
            citylearn_steps=args.citylearn_steps,
            compile=args.compile,
            physics_only=args.physics_only,
        )
        for row in rows:
            _print(row)
    elif args.what == "equivalence":
        for row in long_equivalence(args.site, args.data_root, args.steps, compile_physics=args.compile):
            _print(row)
    else:
        settings = {"epochs": 4, "minibatch_size": 2048} if args.algorithm == "PPO" else {}
        row = training_speed(
            args.algorithm,
            args.site,
            args.data_root,
            args.num_envs,
            args.frames,
            args.rollout_steps,
            compile=args.compile,
            **settings,
        )
        _print(row)
        if args.evaluate:
            _print(policy_on_both(row["agent"].actor, args.site, args.data_root, args.eval_steps))


if __name__ == "__main__":
    main()
