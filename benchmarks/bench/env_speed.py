"""Environment steps/s of the Iquitos site: CityLearn alone, our Gymnasium env, and the TorchRL env agents train on.

Why three layers: the wrapper overhead is what our code adds on top of the simulator. "raw" is
``CityLearnEnv.step`` of the same schema as CityLearn ships it (its action-feedback records on), given
the very actions our env would pass it (sockets without an EV masked to 0); "gym" is
:class:`~iquitos_lightning.envs.citylearn.IquitosEnv` (physics
reads, reward terms, observation); "torchrl" is the env of :func:`~iquitos_lightning.envs.factory.make_env`
(:class:`~iquitos_lightning.envs.gym_env.FlatGymEnv` over it) stepped as the collector steps it. Besides each
layer's overhead over raw CityLearn, the TorchRL layer's own cost over IquitosEnv is reported: the part of a
frame that is ours alone, since Stable-Baselines3 steps IquitosEnv too.
Each layer has its own simulator instance; the three run interleaved, ``steps`` steps per round.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from benchmarks.bench.timing import interleave, median_rate, median_ratio, timed

LAYERS = ("raw", "gym", "torchrl")
# The stack before this bench's fast paths, measured alongside for the before/after: IquitosEnv calling
# CityLearn's public ``step`` with its action-feedback records on, and that env under GymWrapper +
# DoubleToFloat + StepCounter + RewardSum.
BEFORE_LAYERS = ("gym_before", "torchrl_before")
TORCHRL_LAYER = "torchrl_over_gym"  # what the TorchRL env adds to IquitosEnv alone (gym rate / torchrl rate - 1)


@dataclass
class EnvSpeed:
    site: str
    sockets: int
    steps_per_s: dict[str, float]  # by layer (LAYERS, and BEFORE_LAYERS when measured)
    overhead: dict[str, float]  # (raw rate / layer rate) - 1, median over rounds, for every layer but "raw";
    # and TORCHRL_LAYER: (IquitosEnv rate / TorchRL env rate) - 1


def _raw_runner(site: str, data_root: Path, steps: int, seed: int):
    # lazy: CityLearn and TorchRL load only for the layers this section times
    from iquitos_lightning.envs.citylearn import make_iquitos_env
    from iquitos_lightning.fastpath.citylearn_feedback import record_action_feedback

    env = make_iquitos_env(site, data_root=data_root)
    citylearn = env.citylearn
    record_action_feedback(citylearn)  # CityLearn as shipped
    rng = np.random.default_rng(seed)
    state = {"t": 0}
    citylearn.reset()

    def run() -> dict[str, float]:
        for _ in range(steps):
            t = state["t"]
            action = rng.uniform(-1.0, 1.0, 1 + env.sockets)
            sockets = np.where(env.connected[t], np.maximum(action[1:], 0.0), 0.0)
            citylearn.step([[float(action[0]), *sockets.tolist()]])
            state["t"] = t + 1
            if citylearn.terminated or state["t"] >= env.hours:
                citylearn.reset()
                state["t"] = 0
        return {"steps": steps}

    return env.sockets, run


def _gym_runner(site: str, data_root: Path, steps: int, seed: int, before: bool = False):
    # lazy: CityLearn and TorchRL load only for the layers this section times
    from iquitos_lightning.envs.citylearn import make_iquitos_env
    from iquitos_lightning.fastpath.citylearn_feedback import record_action_feedback

    env = make_iquitos_env(site, data_root=data_root)
    if before:
        env._transition = env.citylearn.step
        record_action_feedback(env.citylearn)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)

    def run() -> dict[str, float]:
        for _ in range(steps):
            _, _, terminated, truncated, _ = env.step(rng.uniform(-1.0, 1.0, env.action_space.shape))
            if terminated or truncated:
                env.reset()
        return {"steps": steps}

    return run


def _torchrl_runner(site: str, data_root: Path, steps: int, seed: int):
    # lazy: CityLearn and TorchRL load only for the layers this section times
    from iquitos_lightning.envs.env_config import Backend, EnvConfig, Episodes
    from iquitos_lightning.envs.factory import make_env

    env = make_env(EnvConfig(site=site, backend=Backend(data_root=str(data_root)), episodes=Episodes(seed=seed)))
    return _random_steps(env, steps, seed)


def _torchrl_before_runner(site: str, data_root: Path, steps: int, seed: int):
    # lazy: CityLearn and TorchRL load only for the layers this section times
    from torchrl.envs import DoubleToFloat, GymWrapper, RewardSum, StepCounter, TransformedEnv

    from iquitos_lightning.envs.citylearn import make_iquitos_env
    from iquitos_lightning.envs.factory import EpisodeSeeding
    from iquitos_lightning.fastpath.citylearn_feedback import record_action_feedback

    gym_env = make_iquitos_env(site, data_root=data_root)
    gym_env._transition = gym_env.citylearn.step
    record_action_feedback(gym_env.citylearn)
    env = TransformedEnv(GymWrapper(EpisodeSeeding(gym_env, seed), device="cpu"), DoubleToFloat())
    env.append_transform(StepCounter())
    env.append_transform(RewardSum())
    return _random_steps(env, steps, seed)


def measure_env_speed(
    site: str, *, data_root: Path = Path("data"), steps: int = 50, rounds: int = 3, with_before: bool = True
) -> EnvSpeed:
    """Steps/s of each layer at ``site`` (a profile YAML), interleaved over ``rounds``; ``with_before`` adds
    the pre-fast-path layers (:data:`BEFORE_LAYERS`)."""
    sockets, raw = _raw_runner(site, data_root, steps, seed=0)
    runners = {
        "raw": raw,
        "gym": _gym_runner(site, data_root, steps, 0),
        "torchrl": _torchrl_runner(site, data_root, steps, 0),
    }
    if with_before:
        runners["gym_before"] = _gym_runner(site, data_root, steps, 0, before=True)
        runners["torchrl_before"] = _torchrl_before_runner(site, data_root, steps, 0)
    for run in runners.values():  # warm-up: first steps touch lazily built state
        run()
    results = interleave({name: (lambda run=run: timed(run)) for name, run in runners.items()}, rounds)
    rates = {name: median_rate(results[name], "steps") for name in runners}
    overhead = {name: median_ratio(results["raw"], results[name], "steps") - 1.0 for name in runners if name != "raw"}
    overhead[TORCHRL_LAYER] = median_ratio(results["gym"], results["torchrl"], "steps") - 1.0
    return EnvSpeed(site=Path(site).stem, sockets=sockets, steps_per_s=rates, overhead=overhead)


def _random_steps(env, steps: int, seed: int):
    """A runner stepping a TorchRL env ``steps`` times with seeded uniform random actions (resets as episodes end)."""
    generator = torch.Generator().manual_seed(seed)
    shape = env.action_spec.shape
    state = {"td": env.reset()}

    def run() -> dict[str, float]:
        td = state["td"]
        for _ in range(steps):
            td.set("action", torch.rand(shape, generator=generator) * 2 - 1)
            _, td = env.step_and_maybe_reset(td)
        state["td"] = td
        return {"steps": steps}

    return run
