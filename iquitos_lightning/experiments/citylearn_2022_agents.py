"""The project's agents (SAC, PPO, A2C) on the CityLearn 2022 challenge, trained through the public API and scored
by the protocol's own replay.

Why this way: an agent is an ``EnvConfig(name=<Gymnasium id>)`` away from any env (docs/reuse.md), so the agents are
trained on :mod:`iquitos_lightning.citylearn_2022.gym_env`'s ids exactly as a user would, and their deterministic
policy is then played inside :func:`~iquitos_lightning.citylearn_2022.simulation.run_phase` by
:class:`PolicyController`, the same replay and score as every reference controller: the agents' rows and the
references' differ only in the controller.

Which agent for which phase (no agent trains on a (building, row) pair it is scored on):

- ``problem="five"``: trained on buildings 6-10 over rows 0-5759, scored on buildings 1-5 in phases 1 and 2.
- ``problem="phase3"``: trained on phase 3's fifteen buildings over rows 0-5759, scored on phase 3 (rows 5760-).

Hyperparameters are the card's (configs/base/{sac,ppo,a2c}.yaml with the CPU profiles' networks) but for what this
env changes: one CityLearn env, not a batch of 16-64 twins (so smaller rollouts), and SAC's rewards unscaled (this
reward is already about -1 per hour; see :data:`CARD`).

Run: ``python -m iquitos_lightning.experiments.citylearn_2022_agents --agent sac --seed 0 --frames 60000 --out DIR``
writes the checkpoint, the learning curve (``curve.csv``: frames, seconds, evaluation return) and ``scores.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from tensordict import TensorDict
from torchrl.envs import ExplorationType, set_exploration_type

from iquitos_lightning.agents import A2C, PPO, SAC, EnvConfig, ReplayBufferConfig, RolloutConfig
from iquitos_lightning.citylearn_2022.building_env import (
    BUILDING_ID,
    BUILDING_QUADRATIC_RESIDUAL_ID,
    BUILDING_RESIDUAL_ID,
    BuildingObservation,
)
from iquitos_lightning.citylearn_2022.controllers import self_consumption_action
from iquitos_lightning.citylearn_2022.dataset import PHASES, Phase
from iquitos_lightning.citylearn_2022.gym_env import (
    FIVE_BUILDINGS_ID,
    ID_PREFIX,
    PHASE_THREE_ID,
    ObservationBuilder,
)
from iquitos_lightning.citylearn_2022.scoring import weighted_phase_score
from iquitos_lightning.citylearn_2022.simulation import run_phase
from iquitos_lightning.envs.env_config import Episodes
from iquitos_lightning.fastpath.tanh_normal import evaluation_policy
from iquitos_lightning.report.provenance import git_revision
from iquitos_lightning.report.run_report import plot_health, write_rows_csv
from iquitos_lightning.training.callbacks import PolicyEvaluation
from iquitos_lightning.training.callbacks.report import health_signals

BUILDING_PREFIX = "iquitos_lightning.citylearn_2022.building_env:"
PROBLEMS: dict[str, tuple[str, tuple[int, ...]]] = {
    "five": (ID_PREFIX + FIVE_BUILDINGS_ID, (0, 1)),  # the Gymnasium id, and the indices in PHASES it is scored on
    "phase3": (ID_PREFIX + PHASE_THREE_ID, (2,)),
    # the same rows with the reward relative to no battery (gym_env.RELATIVE_SUFFIX)
    "five_relative": (ID_PREFIX + FIVE_BUILDINGS_ID.replace("-v0", "Relative-v0"), (0, 1)),
    "phase3_relative": (ID_PREFIX + PHASE_THREE_ID.replace("-v0", "Relative-v0"), (2,)),
    # relative reward, the agent acting around the self-consumption rule (gym_env.RESIDUAL_SUFFIX)
    "five_residual": (ID_PREFIX + FIVE_BUILDINGS_ID.replace("-v0", "ResidualRelative-v0"), (0, 1)),
    "phase3_residual": (ID_PREFIX + PHASE_THREE_ID.replace("-v0", "ResidualRelative-v0"), (2,)),
    # one building's battery on the twin, a policy shared by every building of every phase (building_env.py)
    "building": (BUILDING_PREFIX + BUILDING_ID, (0, 1, 2)),
    "building_residual": (BUILDING_PREFIX + BUILDING_RESIDUAL_ID, (0, 1, 2)),
    "building_quadratic_residual": (BUILDING_PREFIX + BUILDING_QUADRATIC_RESIDUAL_ID, (0, 1, 2)),
}
PER_BUILDING = (
    "building",
    "building_residual",
    "building_quadratic_residual",
)  # the problems whose policy acts on one building's observation
POLICIES = ("final", "best")  # which weights a run is scored with (train_agent)
# Per agent: the card's settings (configs/base/*.yaml, CPU networks) adapted to one CityLearn env.
CARD: dict[str, dict[str, Any]] = {
    "sac": {
        "hidden_sizes": (64, 64), "batch_size": 256, "actor_lr": 3e-4, "critic_lr": 1e-3, "alpha_lr": 1e-3,
        "alpha_init": 0.1, "gamma": 0.99, "tau": 0.005, "updates_per_frame": 0.25, "init_random_frames": 5_000,
        "reward_scale": 1.0,  # the card's 0.1 tamed the site's rewards; these are about -1 per hour already
        "frames_per_batch": 256,
    },
    "ppo": {
        "hidden_sizes": (64, 64), "activation": "tanh", "lr": 3e-4, "gamma": 0.995, "gae_lambda": 0.95,
        "clip_epsilon": 0.2, "epochs": 10, "entropy_coef": 0.0, "max_grad_norm": 0.5, "reward_normalization": False,
        "reward_scale": 0.05, "policy_scale": "state", "initialisation": "default", "minibatch_size": 256,
        "frames_per_batch": 2_048,  # the card's 8,192 came from 64 twins; one env fills 2,048 in ~3 episodes
    },
    "a2c": {
        "hidden_sizes": (64, 64), "activation": "tanh", "lr": 3e-4, "lr_anneal": True, "gamma": 0.995,
        "gae_lambda": 0.95, "entropy_coef": 0.0, "max_grad_norm": 0.5, "reward_normalization": False,
        "reward_scale": 0.05, "policy_scale": "parameter", "initial_scale": 0.5, "initialisation": "default",
        "frames_per_batch": 1_024, "noise_hold_steps": 24,
    },
}  # fmt: skip
# What the per-building problems change (building_env.py): their reward is relative to no battery, about +0.07 an
# hour for the self-consumption rule and -0.9 for random actions, twenty times smaller than the central absolute
# reward the card's scales were set on; one twin steps fast enough for the card's PPO batch of 8,192 frames. The
# policy's output layer starts near 0 (CleanRL's 0.01 gain, "orthogonal"), so a residual agent starts at the rule
# it acts around: with the default initialisation PPO's first evaluation was already off it (0.853-0.911 weighted
# over two seeds where the rule scores 0.858); and its exploration noise is smaller than the card's (0.2 before the
# tanh, not 1): a random battery loses ~0.9 an hour of this reward, the rule gains ~0.07.
PER_BUILDING_SETTINGS: dict[str, dict[str, Any]] = {
    "sac": {"reward_scale": 10.0, "frames_per_batch": 1_024},
    "ppo": {
        "reward_scale": 1.0,
        "frames_per_batch": 8_192,
        "minibatch_size": 512,
        "policy_scale": "parameter",
        "initial_scale": 0.2,
        "initialisation": "orthogonal",
    },
    "a2c": {"reward_scale": 1.0, "frames_per_batch": 2_048, "initial_scale": 0.2, "initialisation": "orthogonal"},
}


@dataclass(frozen=True)
class TrainedAgent:
    """What :func:`train_agent` leaves: the agent (its policy), where its checkpoint and learning curve are."""

    agent: Any
    name: str
    problem: str
    seed: int
    frames: int
    seconds: float
    checkpoint: Path
    curve: Path


class LearningCurve(pl.Callback):
    """Appends each evaluation's return (``val/episode_return``, the mean of the evaluation episodes: fixed windows
    of the training rows) to a CSV with the frames trained and the wall seconds: the run's learning curve; and keeps
    the health signals of every update (the ``health/*`` a training step returns: KL, clip fraction, explained
    variance, entropy, Q values, alpha...), written beside it as ``health.csv`` and drawn with the evaluation return
    as ``health.png`` when the fit ends, as the Iquitos runs' reports draw them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.health_path = path.with_name("health.csv")
        self.started = time.perf_counter()
        self.health: list[dict[str, float]] = []
        self.evaluations: list[dict[str, float]] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as file:
            csv.writer(file).writerow(["frames", "seconds", "episode_return"])

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        signals = health_signals(outputs)
        if signals:
            self.health.append({"frames": float(getattr(pl_module, "frames_done", trainer.global_step)), **signals})

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        value = trainer.callback_metrics.get("val/episode_return")
        if trainer.sanity_checking or value is None:
            return
        row = [int(getattr(pl_module, "frames_done", 0)), round(time.perf_counter() - self.started, 1), float(value)]
        self.evaluations.append({"frames": row[0], "episode_return": row[2]})
        with self.path.open("a", newline="") as file:
            csv.writer(file).writerow(row)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.health:
            write_rows_csv(self.health_path, self.health)
            figure = self.health_path.with_suffix(".png")
            plot_health(self.health, self.evaluations, figure, title=self.path.parent.name)


def make_agent(agent: str, seed: int, frames: int, problem: str = "five", eval_every: int | None = None) -> Any:
    """The agent ``agent`` ("sac", "ppo", "a2c") with the card's settings on ``problem``'s training id."""
    if agent not in CARD:
        raise ValueError(f"agent {agent!r}: use one of {sorted(CARD)}")
    settings = dict(CARD[agent]) | (PER_BUILDING_SETTINGS[agent] if problem in PER_BUILDING else {})
    batch = settings.pop("frames_per_batch")
    hold = settings.pop("noise_hold_steps", 1)
    periods = max(round((eval_every or frames // 8) / batch), 1)
    rollout = RolloutConfig(
        frame_budget=frames, frames_per_batch=batch, eval_every_frames=periods * batch,
        eval_episodes=4 if problem in PER_BUILDING else 2,  # a twin's window takes ~1 s, CityLearn's ~10
        noise_hold_steps=hold,
    )  # fmt: skip
    env = EnvConfig(name=PROBLEMS[problem][0], episodes=Episodes(seed=seed))
    if agent == "sac":
        settings["init_random_frames"] = min(settings["init_random_frames"], frames // 4)
        return SAC(env=env, rollout=rollout, buffer=ReplayBufferConfig(capacity=max(frames, 1)), **settings)
    return (PPO if agent == "ppo" else A2C)(env=env, rollout=rollout, **settings)


def train_agent(
    agent: str,
    seed: int,
    frames: int,
    out_dir: Path | str,
    problem: str = "five",
    eval_every: int | None = None,
    policy: str = "final",
) -> TrainedAgent:
    """Train ``agent`` for ``frames`` env frames on ``problem`` (module docstring), seeded by ``seed``; write
    ``final.ckpt`` and ``curve.csv`` (evaluations every ``eval_every`` frames, default 8 per run) under ``out_dir``.

    ``policy``: which weights the returned agent holds, the last ("final") or those of the evaluation with the best
    return ("best", kept as ``best.ckpt``). Why a choice: the evaluations play fixed windows of the training rows,
    never a scored building-hour, so picking on them is selection on training data, as a practitioner would; PPO's
    pilots around the self-consumption rule peaked at their first evaluation and drifted below it after."""
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r}: use one of {POLICIES}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pl.seed_everything(seed, workers=True, verbose=False)
    started = time.perf_counter()
    module = make_agent(agent, seed, frames, problem, eval_every)
    curve = LearningCurve(out / "curve.csv")
    best = ModelCheckpoint(
        dirpath=out, filename="best", monitor="val/episode_return", mode="max", save_top_k=1,
        enable_version_counter=False, save_weights_only=True,
    )  # fmt: skip
    trainer = pl.Trainer(
        max_epochs=-1, accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, callbacks=[PolicyEvaluation(), curve, best],
    )  # fmt: skip
    trainer.fit(module)
    checkpoint = out / "final.ckpt"
    trainer.save_checkpoint(checkpoint)
    if policy == "best" and best.best_model_path:
        checkpoint = Path(best.best_model_path)
        module.load_state_dict(torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"])
    seconds = time.perf_counter() - started
    return TrainedAgent(module, agent, problem, seed, int(module.frames_done), seconds, checkpoint, curve.path)


def deterministic_policy(agent: Any) -> Callable[[np.ndarray], np.ndarray]:
    """``agent``'s evaluated policy at its mode (as its evaluations play it), as a function of one observation or of
    a batch of them (one row per building)."""
    policy = evaluation_policy(agent.evaluated_policy)
    device = agent.device

    def act(observation: np.ndarray) -> np.ndarray:
        seen = torch.as_tensor(observation, dtype=torch.float32, device=device)
        state = TensorDict({"observation": seen}, seen.shape[:-1])  # one observation, or a batch (per building)
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            return policy(state)["action"].cpu().numpy().astype(float)

    return act


class PolicyController:
    """A policy of observations played inside ``run_phase``: it builds, for row ``r``, the observation the env
    builds from the data up to ``r - 1``, CityLearn's net consumption of the rows simulated so far and the batteries'
    state ``run_phase`` hands it: the district's (:class:`~iquitos_lightning.citylearn_2022.gym_env.
    ObservationBuilder`), or with ``per_building`` each building's (:class:`~iquitos_lightning.citylearn_2022.
    building_env.BuildingObservation`), the one policy then acting on every battery as a batch."""

    def __init__(
        self, policy: Callable[[np.ndarray], np.ndarray], residual: bool = False, per_building: bool = False
    ) -> None:
        self.policy = policy
        self.residual = residual  # the policy acts around the self-consumption rule, as it trained
        self.per_building = per_building
        self.observations: list[np.ndarray] = []  # what the policy saw, row by row (a test compares them)

    def start(self, phase: Phase, env: Any) -> None:
        self.phase, self.env = phase, env
        builder = BuildingObservation if self.per_building else ObservationBuilder
        self.builder = builder(phase.buildings)
        self.observations = []

    def act(self, row: int, observation: list[float], soc: np.ndarray) -> np.ndarray:
        index = row - 1 - self.phase.first
        net = np.array([building.net_electricity_consumption[index] for building in self.env.buildings], float)
        self.builder.record(row - 1, net)
        seen = self.builder.observe(row, soc)
        self.observations.append(seen)
        rule = self_consumption_action(self.builder.net, row) if self.residual else 0.0
        return np.asarray(self.policy(seen), float).reshape(-1) + rule


def score_agent(trained: TrainedAgent, hours: int | None = None) -> dict[str, dict[str, float]]:
    """The trained policy's score on each phase its problem is scored on (``hours``: the phases' first hours only,
    for a quick look), with the replay's wall seconds and the rows scored (phase 3: 2,999, ``simulation.py``)."""
    policy = deterministic_policy(trained.agent)
    scores = {}
    for index in PROBLEMS[trained.problem][1]:
        phase = PHASES[index] if hours is None else PHASES[index].shortened(hours)
        controller = PolicyController(
            policy, residual=trained.problem.endswith("_residual"), per_building=trained.problem in PER_BUILDING
        )
        run = run_phase(controller, phase)
        scores[phase.name] = run.score.as_dict() | {"seconds": run.seconds, "hours": int(run.control.shape[1])}
    return scores


TRAINED_ON = {
    "five": "buildings 6-10, days 0-240 (absolute hourly reward); scored on buildings 1-5",
    "five_relative": "buildings 6-10, days 0-240 (reward relative to no battery); scored on buildings 1-5",
    "five_residual": "buildings 6-10, days 0-240, acting around the self-consumption rule; scored on buildings 1-5",
    "phase3": "phase 3's buildings, days 0-240 (absolute hourly reward); scored on days 240-365",
    "phase3_relative": "phase 3's buildings, days 0-240 (reward relative to no battery); scored on days 240-365",
    "phase3_residual": "phase 3's buildings, days 0-240, around the self-consumption rule; scored on days 240-365",
    "building": "one building at a time, buildings 6-17, days 0-240, on the battery twin (reward relative to no "
    "battery); one policy scored on every building of the three phases",
    "building_residual": "one building at a time, buildings 6-17, days 0-240, on the battery twin, acting around the "
    "self-consumption rule; one policy scored on every building of the three phases",
    "building_quadratic_residual": "as building_residual, the grid term of the reward the squared import (not the "
    "rises of the day's peak and the ramp)",
}


def record_row(path: Path, result: dict[str, Any], command: str) -> None:
    """Add (or replace) the run's row in ``path``, in the benchmark page's row format: the phases it was scored on,
    what it trained on, its minutes, command and revision; the weighted scores only when it has all three phases.
    Its learning curve is copied beside it (``curves/<key>.csv``)."""
    phases = [{"phase": name, **values} for name, values in result["phases"].items()]
    whole = len(phases) == len(PHASES) and all(
        phase["hours"] == PHASES[i].scored_hours for i, phase in enumerate(phases)
    )
    key = f"{result['agent']}_{result['problem']}_s{result['seed']}"
    row = {
        "key": key,
        "label": f"{result['agent'].upper()} {result['problem']}, seed {result['seed']}, {result['frames']:,} frames"
        + (", best evaluation's weights" if result.get("policy") == "best" else ""),
        "knows": "the hour before (2.2b0's order)",
        "trained_on": TRAINED_ON[result["problem"]],
        "counterpart": None,
        "phases": phases,
        "weighted": weighted_phase_score(phases) if whole else None,
        "weighted_2022": weighted_phase_score(phases, key="score_2022") if whole else None,
        "minutes": round((result["train_seconds"] + result["score_seconds"]) / 60, 1),
        "command": command,
        "revision": git_revision(),
    }
    rows = json.loads(path.read_text())["rows"] if path.exists() else []
    rows = [existing for existing in rows if existing["key"] != key] + [row]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rows": sorted(rows, key=lambda entry: entry["key"])}, indent=2) + "\n")
    curves = path.parent / "curves"  # the page's learning_curves.png reads them
    curves.mkdir(exist_ok=True)
    (curves / f"{key}.csv").write_text(Path(result["curve"]).read_text())


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m iquitos_lightning.experiments.citylearn_2022_agents``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="sac", choices=sorted(CARD))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--frames", type=int, default=60_000)
    parser.add_argument("--problem", default="five", choices=sorted(PROBLEMS))
    parser.add_argument("--eval-every", type=int, default=None)
    parser.add_argument(
        "--policy",
        default="final",
        choices=POLICIES,
        help="score the last weights or the best evaluated on the training windows (train_agent)",
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--record",
        type=Path,
        default=None,
        help="add the run's row to this agents.json (results/citylearn-2022/agents.json: the benchmark page reads it)",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    trained = train_agent(args.agent, args.seed, args.frames, args.out, args.problem, args.eval_every, args.policy)
    scored = time.perf_counter()
    scores = score_agent(trained)
    result = {
        "agent": trained.name, "problem": trained.problem, "seed": trained.seed, "frames": trained.frames,
        "policy": args.policy,
        "train_seconds": round(trained.seconds, 1), "score_seconds": round(time.perf_counter() - scored, 1),
        "checkpoint": str(trained.checkpoint), "curve": str(trained.curve), "phases": scores,
    }  # fmt: skip
    (args.out / "scores.json").write_text(json.dumps(result, indent=2))
    if args.record is not None:
        command = "python -m iquitos_lightning.experiments.citylearn_2022_agents " + " ".join(argv or sys.argv[1:])
        record_row(args.record, result, command)
    summary = {name: round(values["score"], 4) for name, values in scores.items()}
    print(json.dumps({k: v for k, v in result.items() if k != "phases"} | {"scores": summary}))


if __name__ == "__main__":
    main()
