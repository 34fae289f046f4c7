"""The batched twin against the real CityLearn env on the tiny site's whole episode (168 h, 4 sockets).

Equality is asserted at 1e-5 relative per step (observations, rewards) and 0.1 % on the KPIs, as
the issue asks; on this site the twin is in fact bit-equal to CityLearn in observations and flows
(rewards differ only by the float32 cast every TorchRL env applies).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from tensordict import TensorDict
from torchrl.envs import ExplorationType, set_exploration_type
from torchrl.envs.utils import step_mdp

from benchmarks.bench.equivalence import citylearn_trajectory, compare, twin_trajectories
from iquitos_lightning.agents import PPO, EnvConfig, RolloutConfig
from iquitos_lightning.control.references import RuleBasedController, UncontrolledController
from iquitos_lightning.envs.actions import SELF_CONSUMPTION_WINDOW
from iquitos_lightning.envs.citylearn import IquitosEnv, make_iquitos_env
from iquitos_lightning.envs.env_config import Backend
from iquitos_lightning.envs.factory import make_env, site_env
from iquitos_lightning.envs.twin import IquitosTwin
from iquitos_lightning.metrics.kpis import compute_kpis
from iquitos_lightning.site.build import SCHEMA_FILE, build_site
from iquitos_lightning.site.config import load_site_config
from iquitos_lightning.training.callbacks import PolicyEvaluation

TINY = Path(__file__).resolve().parents[2] / "configs" / "site" / "tiny.yaml"
STEP_RTOL = 1e-5  # per-step observations and rewards
KPI_RTOL = 1e-3  # yearly KPIs: 0.1 %


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def citylearn(data_root: Path) -> IquitosEnv:
    return make_iquitos_env(TINY, data_root=data_root)


def random_source(seed: int):
    rng = np.random.default_rng(seed)
    return lambda observation, state: rng.uniform(-1.0, 1.0, 1 + len(state.socket_connected))


def controller_source(controller):
    return lambda observation, state: controller.act(state)


def assert_equivalent(errors: dict[str, float], label: str) -> None:
    assert errors["observation"] <= STEP_RTOL, (label, errors)
    assert errors["reward"] <= STEP_RTOL, (label, errors)
    assert errors["flows"] <= STEP_RTOL and errors["departures"] <= STEP_RTOL, (label, errors)
    assert errors["kpi"] <= KPI_RTOL, (label, errors)


def test_twin_replays_random_uncontrolled_and_rule_based_years_as_citylearn(citylearn: IquitosEnv) -> None:
    config = citylearn.site_config
    sources = {
        "random": random_source(0),
        "random_bess_extremes": lambda observation, state: np.sign(random_source(1)(observation, state)),
        "uncontrolled": controller_source(UncontrolledController(config)),
        "rule_based": controller_source(RuleBasedController(config)),
    }
    references = {name: citylearn_trajectory(citylearn, source) for name, source in sources.items()}
    # One batched twin runs the four sequences side by side (one env each).
    twin = IquitosTwin(citylearn.schema_path, citylearn.series, num_envs=len(sources), record=True)
    replays = twin_trajectories(twin, np.stack([run.actions for run in references.values()]))
    for (name, reference), replay in zip(references.items(), replays, strict=True):
        assert len(reference.rewards) == config.hours
        assert_equivalent(compare(reference, replay), name)
        np.testing.assert_array_equal(reference.observations, replay.observations)  # bit-equal on this site
    # The runs really differ from each other (the comparison is not vacuous).
    assert references["rule_based"].kpis["co2_kg"] < references["uncontrolled"].kpis["co2_kg"]
    assert references["random"].kpis["bess_equivalent_full_cycles"] > 0


@pytest.mark.parametrize(
    ("layout", "objective", "observation"),
    [
        ("fleet", "thesis", "full"),
        ("per_socket", "tariff", "auto"),  # full: per-socket actions keep the per-socket block
        ("fleet", "tariff", "full"),
        ("fleet", "thesis", "auto"),  # compact: the fleet sums from the bands, computed by each simulator
        ("fleet", "tariff", "compact"),
        ("per_socket", "thesis", "compact"),  # compact with per-socket actions (allowed when asked for)
    ],
)
def test_twin_equals_citylearn_for_both_layouts_and_both_objectives(
    data_root: Path, layout: str, objective: str, observation: str
) -> None:
    """The ``per_socket``/``thesis``/full triple is the test above; here the other layouts x objectives x
    observation layouts, bit-equal in the observation."""
    options = {"layout": layout, "objective": objective, "observation": observation}
    env = make_iquitos_env(TINY, data_root=data_root, **options)
    sources = {"random": random_source(3), "random_extremes": lambda o, s: np.sign(random_source(4)(o, s))}
    references = {}
    for name, source in sources.items():
        references[name] = citylearn_trajectory(
            env, lambda o, s, source=source: source(o, s)[: env.action_space.shape[0]]
        )
    twin = IquitosTwin(env.schema_path, env.series, num_envs=2, record=True, **options)
    assert twin.tables.observation_names == env.observation_names
    assert len(env.observation_names) == (20 if objective == "thesis" else 64) + (
        4 * env.sockets if env.observation == "full" else 6
    )
    replays = twin_trajectories(twin, np.stack([run.actions for run in references.values()]))
    for (name, reference), replay in zip(references.items(), replays, strict=True):
        assert_equivalent(compare(reference, replay), f"{layout}/{objective}/{name}")
        np.testing.assert_array_equal(reference.observations, replay.observations)
    if objective == "tariff":  # the reward is the bill: its return times -scale is energy + demand + CO2
        from iquitos_lightning.envs.objectives import tariff_bill

        reference = references["random"]
        bill = tariff_bill(reference.flows, env.site_config)["tariff_cost"]
        assert float(reference.rewards.sum()) * -env.tariff.scale == pytest.approx(bill, rel=1e-9)
        peak_index = env.tables.peak_index
        assert reference.observations[:, peak_index].max() > 0  # the month-to-date peak is observed


def test_twin_matches_citylearn_with_efficiency_and_power_curves_standby_loss_and_fade(
    citylearn: IquitosEnv, tmp_path: Path
) -> None:
    """CityLearn's battery features the site leaves flat, switched on in a copy of the schema."""
    folder = tmp_path / "curved"
    shutil.copytree(citylearn.schema_path.parent, folder)
    schema = json.loads((folder / SCHEMA_FILE).read_text())
    bess = schema["buildings"]["mall"]["electrical_storage"]["attributes"]
    bess["power_efficiency_curve"] = [[0.0, 0.83], [0.3, 0.83], [0.7, 0.9], [0.8, 0.9], [1.0, 0.85]]
    bess["capacity_power_curve"] = [[0.0, 1.0], [0.8, 1.0], [1.0, 0.2]]
    bess["loss_coefficient"] = 0.004
    bess["capacity_loss_coefficient"] = 1e-3
    for vehicle in schema["electric_vehicles_def"].values():
        vehicle["battery"]["attributes"]["capacity_power_curve"] = [[0.0, 1.0], [0.7, 1.0], [1.0, 0.3]]
        vehicle["battery"]["attributes"]["power_efficiency_curve"] = [[0.0, 0.9], [1.0, 0.95]]
    (folder / SCHEMA_FILE).write_text(json.dumps(schema))
    curved = IquitosEnv(folder / SCHEMA_FILE, citylearn.series)
    reference = citylearn_trajectory(curved, random_source(2))
    twin = IquitosTwin(folder / SCHEMA_FILE, citylearn.series, record=True)
    (replay,) = twin_trajectories(twin, reference.actions[None])
    assert_equivalent(compare(reference, replay), "curved")
    flat = citylearn_trajectory(citylearn, random_source(2))
    assert abs(flat.kpis["grid_import_kwh"] - reference.kpis["grid_import_kwh"]) > 1.0  # the curves matter


def test_partial_reset_restarts_only_the_masked_envs(citylearn: IquitosEnv) -> None:
    pair = IquitosTwin(citylearn.schema_path, citylearn.series, num_envs=2)
    single = IquitosTwin(citylearn.schema_path, citylearn.series, num_envs=1)
    first = pair.reset()
    single.reset()
    ones = torch.ones(1, pair.action_spec.shape[-1])
    pair_action = TensorDict({"action": ones.expand(2, -1)}, batch_size=[2])
    single_action = TensorDict({"action": ones}, batch_size=[1])
    for _ in range(12):
        current = step_mdp(pair.step(pair_action.clone()))
        single.step(single_action.clone())
    current["_reset"] = torch.tensor([[True], [False]])
    reset = pair.reset(current)
    np.testing.assert_array_equal(reset["observation"][0], first["observation"][0])
    np.testing.assert_array_equal(reset["observation"][1], current["observation"][1])
    assert pair._state.t.tolist() == [0, 12]
    restarted = pair.step(pair_action.clone())["next", "observation"]
    continued = single.step(single_action.clone())["next", "observation"]
    np.testing.assert_array_equal(restarted[1], continued[0])  # env 1 went on untouched
    fresh = IquitosTwin(citylearn.schema_path, citylearn.series, num_envs=1)
    fresh.reset()
    np.testing.assert_array_equal(restarted[0], fresh.step(single_action.clone())["next", "observation"][0])


def test_make_env_trains_on_the_twin_and_always_evaluates_on_citylearn(data_root: Path) -> None:
    config = EnvConfig(site=str(TINY), backend=Backend(train="twin", num_envs=3, data_root=str(data_root)))
    train = make_env(config)
    assert isinstance(train, IquitosTwin) and train.batch_size == torch.Size([3])
    rollout = train.rollout(5)
    assert rollout.shape == (3, 5) and ("next", "episode_reward") in rollout.keys(True)
    assert site_env(make_env(config, evaluation=True)) is not None  # CityLearn's IquitosEnv
    with pytest.raises(ValueError):
        EnvConfig(backend=Backend(train="gpu"))
    with pytest.raises(ValueError):
        EnvConfig(backend=Backend(num_envs=4))  # several envs need the twin


def test_ppo_trained_on_the_twin_scores_the_same_on_citylearn_and_on_the_twin(data_root: Path) -> None:
    hours = load_site_config(TINY).hours
    torch.manual_seed(0)
    agent = PPO(
        env=EnvConfig(site=str(TINY), backend=Backend(train="twin", num_envs=8, data_root=str(data_root))),
        rollout=RolloutConfig(
            frame_budget=8 * hours, frames_per_batch=8 * hours, eval_every_frames=8 * hours, eval_episodes=1
        ),
        hidden_sizes=(32, 32),
        epochs=2,
        minibatch_size=336,
    )
    trainer = pl.Trainer(
        accelerator="cpu",
        max_epochs=-1,
        num_sanity_val_steps=0,
        logger=False,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        callbacks=[PolicyEvaluation()],  # what validates
    )
    trainer.fit(agent)
    assert agent.frames_done == 8 * hours and agent.episodes_done == 8
    assert trainer.callback_metrics["val/episode_length"] == hours  # validated on CityLearn

    # The policy, deterministic, closed loop on each simulator: same trajectory, same KPIs.
    citylearn_return, citylearn_rollout = agent.evaluate_episode(0)
    citylearn_env = site_env(agent.eval_env)
    citylearn_kpis = compute_kpis(citylearn_env.flows(), citylearn_env.departures(), citylearn_env.site_config)
    build = build_site(load_site_config(TINY), data_root / "tiny", progress=False)
    twin = IquitosTwin(build.schema_path, build.series, record=True)
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        twin_rollout = twin.rollout(hours + 1, agent.actor, break_when_any_done=True)
    twin_kpis = compute_kpis(twin.flows(), twin.departures(), twin.site_config)
    assert twin_rollout.shape == (1, hours)
    np.testing.assert_allclose(
        twin_rollout["next", "observation"][0], citylearn_rollout["next", "observation"], rtol=STEP_RTOL
    )
    np.testing.assert_allclose(twin_rollout["next", "reward"][0], citylearn_rollout["next", "reward"], rtol=STEP_RTOL)
    assert float(twin_rollout["next", "reward"].sum()) == pytest.approx(citylearn_return, rel=STEP_RTOL)
    for name, value in citylearn_kpis.items():
        assert twin_kpis[name] == pytest.approx(value, rel=KPI_RTOL, abs=1e-6), name


def test_twin_speed_table_gives_citylearn_and_one_row_per_batch_size(data_root: Path) -> None:
    from benchmarks.twin_speed import twin_speed_table

    rows = twin_speed_table(TINY, data_root, (1, 4), citylearn_steps=3, seconds=0.05)
    assert [(row["simulator"], row["num_envs"]) for row in rows] == [("citylearn", 1), ("twin", 1), ("twin", 4)]
    assert all(row["steps_per_s"] > 0 and row["steps_per_cpu_s"] > 0 for row in rows)


def test_compile_physics_reaches_the_twin_despite_torchrls_own_compile_keyword(citylearn: IquitosEnv) -> None:
    # torch.compile is lazy: building the compiled twin is cheap, compiling happens on the first step.
    twin = IquitosTwin(citylearn.schema_path, citylearn.series, compile_physics=True)
    assert "_simulate" in vars(twin)  # the compiled function shadows the eager method
    assert "_simulate" not in vars(IquitosTwin(citylearn.schema_path, citylearn.series))


def test_sac_on_the_twin_stores_one_buffer_row_per_transition(data_root: Path) -> None:
    from iquitos_lightning.agents import SAC, ReplayBufferConfig

    torch.manual_seed(0)
    agent = SAC(
        env=EnvConfig(site=str(TINY), backend=Backend(train="twin", num_envs=4, data_root=str(data_root))),
        rollout=RolloutConfig(frame_budget=4 * 84, frames_per_batch=4 * 42, eval_every_frames=4 * 84, eval_episodes=0),
        buffer=ReplayBufferConfig(capacity=1_000),
        hidden_sizes=(16, 16),
        batch_size=16,
        init_random_frames=168,
        updates_per_frame=0.05,  # a few updates: the test is about storage, not learning
    )
    pl.Trainer(
        accelerator="cpu",
        max_epochs=-1,
        num_sanity_val_steps=0,
        logger=False,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    ).fit(agent)
    assert agent.frames_done == len(agent.replay_buffer) == 4 * 84
    assert (
        agent.replay_buffer.sample()["observation"].shape[-1]
        == agent.train_env.observation_spec["observation"].shape[-1]
    )


# ----- the derived layouts: the agent's action turned into a fleet one from the hour's state, in both simulators
@pytest.mark.parametrize(
    ("layout", "objective"),
    [(SELF_CONSUMPTION_WINDOW, "thesis"), (SELF_CONSUMPTION_WINDOW, "tariff")],
)
def test_the_twin_equals_citylearn_with_the_derived_layouts(data_root: Path, layout: str, objective: str) -> None:
    """The derived layout turns the agent's action into a ``fleet`` one from the hour's state, in both simulators (a
    residual agent's wrapper above the env: tests/control/test_residual.py)."""
    env = make_iquitos_env(TINY, data_root=data_root, layout=layout, objective=objective)
    extremes, count = random_source(6), env.action_space.shape[0]  # 4 in the window layout
    sources = {
        "zero": lambda observation, state: np.zeros(count),
        "random": lambda o, s: 0.5 * random_source(3)(o, s)[:count],
        "extremes": lambda o, s: np.sign(extremes(o, s)[:count]),  # the maps' ends (-1, +1)
    }
    references = {name: citylearn_trajectory(env, source) for name, source in sources.items()}
    twin = IquitosTwin(env.schema_path, env.series, num_envs=3, record=True, layout=layout, objective=objective)
    replays = twin_trajectories(twin, np.stack([run.actions for run in references.values()]))
    for (name, reference), replay in zip(references.items(), replays, strict=True):
        assert_equivalent(compare(reference, replay), f"{objective}/{name}")
        np.testing.assert_array_equal(reference.observations, replay.observations)


def test_the_twin_equals_citylearn_with_an_idle_band(data_root: Path) -> None:
    """``self_consumption_window`` with ``idle_band``: both simulators idle the battery for the same small actions and
    stretch the rest alike; the band changes what random actions do (it is not a no-op)."""
    options = {"layout": SELF_CONSUMPTION_WINDOW, "objective": "thesis"}
    env = make_iquitos_env(TINY, data_root=data_root, idle_band=0.4, **options)
    draws = random_source(11)
    reference = citylearn_trajectory(env, lambda o, s: 0.6 * draws(o, s)[:4])
    twin = IquitosTwin(env.schema_path, env.series, num_envs=1, record=True, idle_band=0.4, **options)
    (replay,) = twin_trajectories(twin, reference.actions[None])
    assert_equivalent(compare(reference, replay), "self_consumption_window/thesis/idle_band")
    np.testing.assert_array_equal(reference.observations, replay.observations)
    plain = IquitosTwin(env.schema_path, env.series, num_envs=1, record=True, **options)
    (unbanded,) = twin_trajectories(plain, reference.actions[None])
    idle_hours = (replay.flows["bess_charge_kw"] + replay.flows["bess_discharge_kw"]).abs() < 1e-9
    idle_plain = (unbanded.flows["bess_charge_kw"] + unbanded.flows["bess_discharge_kw"]).abs() < 1e-9
    assert idle_hours.sum() > idle_plain.sum() + 5


def test_the_twin_equals_citylearn_with_the_tariff_training_aids(data_root: Path) -> None:
    """``demand_period: day`` restarts the billed peak each midnight and ``stored_energy_value`` adds the same
    potential-based shaping in both simulators (rewards and observations)."""
    options = {"layout": SELF_CONSUMPTION_WINDOW, "objective": "tariff", "demand_period": "day"}
    env, reference, replay, shaping = shaped_runs(data_root, options, value=0.4, seed=5)
    assert_equivalent(compare(reference, replay), "self_consumption_window/tariff/day/shaped")
    np.testing.assert_array_equal(reference.observations, replay.observations)
    peak = reference.observations[:, env.tables.peak_index]
    assert peak[24] == 0.0 and peak[23] > 0  # restarted at the second midnight (observation of step 24)
    # The shaping is there (the same actions without it score otherwise) and is the potential's difference.
    np.testing.assert_allclose(shaping, potential_difference(env, replay, 0.4) / env.tariff.scale, rtol=1e-4, atol=1e-6)


def shaped_runs(data_root: Path, options: dict, value: float, seed: int):
    """CityLearn with the stored-energy shaping on random actions, the twin's replay of them with the shaping, and
    what the shaping added to each step's reward (the replay's rewards less an unshaped twin's on the same actions)."""
    shaping = {"stored_energy_value": value, "shaping_gamma": 0.99}
    env = make_iquitos_env(TINY, data_root=data_root, **options, **shaping)
    count = env.action_space.shape[0]
    reference = citylearn_trajectory(env, lambda o, s: 0.5 * random_source(seed)(o, s)[:count])
    twin = IquitosTwin(env.schema_path, env.series, num_envs=1, record=True, **options, **shaping)
    (replay,) = twin_trajectories(twin, reference.actions[None])
    unshaped_twin = IquitosTwin(env.schema_path, env.series, num_envs=1, record=True, **options)
    (unshaped,) = twin_trajectories(unshaped_twin, reference.actions[None])
    return env, reference, replay, replay.rewards - unshaped.rewards


def potential_difference(env, run, value: float) -> np.ndarray:
    """``0.99 x phi(s') - phi(s)`` per step of ``run``, ``phi`` the BESS energy at ``value`` a kWh (before scaling)."""
    soc = np.concatenate([[env.site_config.bess.initial_soc], run.flows["bess_soc"].to_numpy()])
    energy_value = value * env.site_config.bess.capacity_kwh
    return 0.99 * energy_value * soc[1:] - energy_value * soc[:-1]


def test_the_twin_equals_citylearn_with_the_stored_energy_shaping_on_thesis(data_root: Path) -> None:
    """On ``thesis`` the shaping is the same potential's difference in the thesis reward's units (divided by the
    site's largest import: objectives.shaping_scale), in both simulators."""
    options = {"layout": "self_consumption_window", "objective": "thesis"}
    env, reference, replay, shaping = shaped_runs(data_root, options, value=0.62, seed=7)
    assert_equivalent(compare(reference, replay), "self_consumption_window/thesis/shaped")
    expected = potential_difference(env, replay, 0.62) / env.reward_scales.max_import_kw
    assert np.abs(expected).max() > 1e-4  # the battery moved: the shaping is not trivially 0
    np.testing.assert_allclose(shaping, expected, rtol=1e-4, atol=1e-7)
