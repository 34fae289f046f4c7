"""The learner section: does our learner keep up with the twin? Our agents against plain PyTorch loops (issue 31).

With the twin, an env step of 64 sites costs a millisecond or two, so frames/s are set by the learner: the
collector, the policy, the advantages, the updates, logging. For PPO, A2C and SAC at their experiment profiles'
settings (``configs/experiments/tariff/*_fleet_tariff_twin_cpu.yaml``), this measures in one run:

- frames/s and updates/s of our agent through ``fit`` (:func:`~.learner_runs.run_project`) and of the plain loop of
  the same algorithm, settings, twin and envs (:mod:`.plain_loops`), interleaved in rounds, with the median of the
  per-round ratios ours / plain (:mod:`.timing`);
- for PPO, our frames/s with the compact observation (the profile's) over the full one (``env.observation:
  full``, four columns per socket), in the same rounds;
- where our time goes: one more fit of each algorithm under cProfile, read as phases (:mod:`.learner_profile`).

Every rate is taken over the same window on both sides: from the end of the warm-up (one rollout; SAC: its random
frames and first learning rollout) to the end of the last rollout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from benchmarks.bench.learner_profile import PhaseProfile, profile_fit
from benchmarks.bench.learner_runs import (
    LearnerCase,
    agent_hparams,
    merged_settings,
    run_plain,
    run_project,
    warmup_frames,
)
from benchmarks.bench.ours import window_rate
from benchmarks.bench.timing import Rate, interleave, median_rate, median_ratio, ratio_range
from iquitos_lightning.envs.env_config import EnvConfig
from iquitos_lightning.envs.factory import env_specs

# Timed rollouts per round, sized so that each side's window is a second or more on the 2-core machine
# (PPO: 8,192 frames and 160 updates a rollout; A2C: 512 frames and 1 update; SAC: 256 frames and 64 updates).
TIMED_ROLLOUTS = {"PPO": 2, "A2C": 24, "SAC": 4}
# --quick: a few small rollouts on the tiny site (proves the section runs; measures nothing).
QUICK_OVERRIDES = {
    "PPO": {
        "env": {"backend": {"num_envs": 8}},
        "rollout": {"frames_per_batch": 256},
        "minibatch_size": 64,
        "epochs": 2,
    },
    "A2C": {"env": {"backend": {"num_envs": 8}}, "rollout": {"frames_per_batch": 64}},
    "SAC": {
        "env": {"backend": {"num_envs": 4}},
        "rollout": {"frames_per_batch": 32},
        "init_random_frames": 64,
        "buffer": {"capacity": 1_000},
        "batch_size": 32,
    },
}
QUICK_ROLLOUTS = {"PPO": 2, "A2C": 3, "SAC": 2}


@dataclass(frozen=True)
class LearnerConfig:
    """What the learner section runs (defaults: the experiment profiles on the default site)."""

    site: str = "configs/site/iquitos-2026.yaml"
    data_root: str = "data"
    algorithms: tuple[str, ...] = ("PPO", "A2C", "SAC")
    rounds: int = 2
    timed_rollouts: Mapping[str, int] = field(default_factory=lambda: dict(TIMED_ROLLOUTS))
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # per algorithm, into the profile
    observation_ratio: bool = True  # PPO compact vs full observation
    profile: bool = True  # one cProfile'd fit per algorithm
    compiled: bool = False  # also time ours with the update torch.compile'd (``speed.compile``), in the same rounds
    fused_adam: bool = False  # ours (every side of it) steps Adam's fused kernel (``speed.fused_adam``)
    rollout_scale: float = 1.0  # multiplies the timed rollouts (at least one each)

    @classmethod
    def quick(cls, **fields: Any) -> LearnerConfig:
        """Small rollouts of every algorithm (the tiny site by default): proves the section runs, measures nothing."""
        fields = {"site": "configs/site/tiny.yaml", "rounds": 1} | fields
        return cls(timed_rollouts=dict(QUICK_ROLLOUTS), overrides=QUICK_OVERRIDES, **fields)

    def case(self, algorithm: str) -> LearnerCase:
        overrides = self.overrides.get(algorithm, {})
        if self.fused_adam:
            overrides = merged_settings(overrides, {"speed": {"fused_adam": True}})
        return LearnerCase(
            algorithm,
            self.site,
            self.data_root,
            timed_rollouts=max(1, round(self.timed_rollouts[algorithm] * self.rollout_scale)),
            overrides=overrides,
        )


@dataclass
class LearnerRow:
    """One algorithm: ours against the plain loop, medians over rounds."""

    algorithm: str
    settings: str
    project_frames_per_s: float
    plain_frames_per_s: float
    frames_ratio: float  # median over rounds of ours / plain
    project_updates_per_s: float
    plain_updates_per_s: float
    updates_ratio: float
    rounds: int
    compiled_frames_per_s: float | None = None  # ours with speed.compile, same rounds (None: not asked for)
    compiled_ratio: float | None = None  # median over rounds of ours compiled / plain
    frames_ratio_range: tuple[float, float] | None = None  # lowest and highest per-round ours / plain
    compiled_ratio_range: tuple[float, float] | None = None  # the same of ours compiled / plain


@dataclass
class ObservationRow:
    """PPO, compact against full observation in the same rounds: ours, and the plain loop's (what the same update
    written without the library gains from the smaller first layer: the ceiling of ours' ratio at these settings)."""

    compact_inputs: int
    full_inputs: int
    compact_frames_per_s: float
    full_frames_per_s: float
    ratio: float  # median over rounds of compact / full
    plain_compact_frames_per_s: float
    plain_full_frames_per_s: float
    plain_ratio: float  # median over rounds of the plain loop's compact / full


@dataclass
class LearnerResult:
    rows: list[LearnerRow]
    observation: ObservationRow | None
    profiles: list[PhaseProfile]
    fused_adam: bool = False  # ours stepped Adam's fused kernel (``--fused-adam on``)


def describe(algorithm: str, hparams: Mapping[str, Any]) -> str:
    """The settings that set the learner's work, as one table cell."""
    envs, frames = int(hparams["env"]["backend"]["num_envs"]), int(hparams["rollout"]["frames_per_batch"])
    hidden = "x".join(str(width) for width in hparams["hidden_sizes"])
    parts = [f"{envs} envs x {frames // envs} steps", f"{hidden} {hparams['activation']}"]
    if algorithm == "PPO":
        parts.append(f"{hparams['epochs']} epochs x {hparams['minibatch_size']}-frame minibatches")
    elif algorithm == "SAC":
        parts.append(f"batch {hparams['batch_size']}, {hparams['updates_per_frame']:g} updates/frame")
    else:
        parts.append("1 update a rollout")
    return ", ".join(parts)


def observation_inputs(hparams: Mapping[str, Any], observation: str | None = None) -> int:
    env = dict(hparams["env"]) | ({} if observation is None else {"observation": observation})
    specs = env_specs(EnvConfig(**env))
    try:
        return int(specs.observation_spec["observation"].shape[-1])
    finally:
        specs.close()


def _row(algorithm: str, settings: str, project: list[Rate], plain: list[Rate]) -> LearnerRow:
    return LearnerRow(
        algorithm=algorithm,
        settings=settings,
        project_frames_per_s=median_rate(project, "frames"),
        plain_frames_per_s=median_rate(plain, "frames"),
        frames_ratio=median_ratio(project, plain, "frames"),
        project_updates_per_s=median_rate(project, "updates"),
        plain_updates_per_s=median_rate(plain, "updates"),
        updates_ratio=median_ratio(project, plain, "updates"),
        rounds=len(project),
        frames_ratio_range=ratio_range(project, plain, "frames"),
    )


def measure_learner(config: LearnerConfig) -> LearnerResult:
    """Each algorithm's rounds (ours, plain, and for PPO ours on the full observation), then its profile."""
    rows: list[LearnerRow] = []
    observation: ObservationRow | None = None
    profiles: list[PhaseProfile] = []
    for algorithm in config.algorithms:
        case = config.case(algorithm)
        hparams = agent_hparams(case)
        start = warmup_frames(algorithm, hparams)
        sides = {
            "project": lambda case=case, start=start: window_rate(run_project(case), start),
            "plain": lambda case=case, hparams=hparams, start=start: window_rate(run_plain(case, hparams), start),
        }
        full = replace(case, observation="full")
        if algorithm == "PPO" and config.observation_ratio:
            full_hparams = agent_hparams(full)
            sides["full"] = lambda full=full, start=start: window_rate(run_project(full), start)
            sides["plain full"] = lambda full=full, hp=full_hparams, start=start: window_rate(
                run_plain(full, hp), start
            )
        if config.compiled:
            compiled = replace(case, overrides=merged_settings(case.overrides, {"speed": {"compile": True}}))
            sides["compiled"] = lambda compiled=compiled, start=start: window_rate(run_project(compiled), start)
        results = interleave(sides, config.rounds)
        row = _row(algorithm, describe(algorithm, hparams), results["project"], results["plain"])
        if "compiled" in results:
            row.compiled_frames_per_s = median_rate(results["compiled"], "frames")
            row.compiled_ratio = median_ratio(results["compiled"], results["plain"], "frames")
            row.compiled_ratio_range = ratio_range(results["compiled"], results["plain"], "frames")
        rows.append(row)
        if "full" in results:
            observation = ObservationRow(
                compact_inputs=observation_inputs(hparams),
                full_inputs=observation_inputs(hparams, "full"),
                compact_frames_per_s=median_rate(results["project"], "frames"),
                full_frames_per_s=median_rate(results["full"], "frames"),
                ratio=median_ratio(results["project"], results["full"], "frames"),
                plain_compact_frames_per_s=median_rate(results["plain"], "frames"),
                plain_full_frames_per_s=median_rate(results["plain full"], "frames"),
                plain_ratio=median_ratio(results["plain"], results["plain full"], "frames"),
            )
        if config.profile:
            profiles.append(profile_fit(algorithm, start, lambda callbacks, case=case: run_project(case, callbacks)))
    return LearnerResult(rows, observation, profiles, config.fused_adam)
