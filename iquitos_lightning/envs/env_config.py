"""The environment's options in four types: the problem, the backend that simulates it, how its episodes are drawn,
the twin's training aids.

Why four: an env option answers one of four questions, and mixing them in one flat list made every option look
like it applied everywhere (it took eight "twin backend only" cross-checks to say otherwise):

- :class:`EnvConfig` itself is **the problem**: which site or Gymnasium task, the action layout (and the controller a
  residual agent acts around), the objective, what the observation holds, the EV guarantee, the years evaluations
  report and select on. Every simulator of the site poses the same problem, and an evaluation always scores it.
- :class:`Backend` (``env.backend``) is **what simulates it**: CityLearn or the twin for training and for
  evaluations, how many envs step at once, whether the twin's step is compiled and where the site's data is built.
  It changes speed, not results (the twin is bit-equal to CityLearn).
- :class:`Episodes` (``env.episodes``) is **how episodes are drawn**: the seeds of the training and evaluation
  episodes, and a Gymnasium id's episode length. It picks which episodes of the problem a run sees.
- :class:`TrainingAids` (``env.training``) are **the twin's training aids**: where and how long training episodes
  run, the years they run on, the start peak, reward baseline, shaping and the critic's hindsight. They shape what
  the agent learns from; evaluations never see them. Only the twin implements them, so they need
  ``backend.train: twin`` on the Iquitos site.

Six checks cross the groups (``EnvConfig._check``): the training aids need the twin on the Iquitos site; the twin
simulates only the Iquitos site; a residual does not run on ``backend.device: training``; the training years
(``training.train_site_seeds``) leave out the site's own year, the one evaluations report; the selection year
(``validation_site_seed``) is not a training year; ``episodes.max_steps`` is for a Gymnasium id.

A bad value in any of the four is a :class:`~iquitos_lightning.errors.ConfigError` naming the option under
``model.init_args.env`` (:func:`env_option_errors`): one line at the command line, whichever group it is in. The
groups are built by jsonargparse on their own, before :class:`EnvConfig`, so each group raises it itself (a plain
``ValueError`` from ``Backend`` ended in a traceback with the whole namespace dumped). Keys that moved into the
groups: envs/moved_keys.py.

Each option keeps its name from the YAML (``model.init_args.env.layout``) to the function that uses it
(``layout`` in :func:`~iquitos_lightning.envs.env_action.applied_action`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

from iquitos_lightning.envs.actions import LAYOUTS, SELF_CONSUMPTION_LAYOUTS
from iquitos_lightning.envs.hindsight import check_critic_forecasts
from iquitos_lightning.envs.moved_keys import ENV_GROUPS, ENV_OPTION, GROUPS_THAT_WERE_VALUES, MOVED_ENV_KEYS
from iquitos_lightning.envs.objectives import DEMAND_PERIODS, OBJECTIVES
from iquitos_lightning.envs.reward_baseline import NO_BASELINE, check_reward_baseline
from iquitos_lightning.envs.self_consumption import check_idle_band
from iquitos_lightning.envs.site_data import site_config_of
from iquitos_lightning.envs.site_tables import AUTO, OBSERVATION_MODES
from iquitos_lightning.envs.start_peak import check_start_peak
from iquitos_lightning.envs.twin_starts import START_SCHEDULES
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.site.forecasts import PAST_DAYS, check_forecasts

IQUITOS = "iquitos"
CITYLEARN = "citylearn"
TWIN = "twin"
BACKENDS = (CITYLEARN, TWIN)
CPU, TRAINING_DEVICE = "cpu", "training"
TWIN_DEVICES = (CPU, TRAINING_DEVICE)


@contextmanager
def env_option_errors() -> Iterator[None]:
    """A ``ValueError``/``TypeError`` of an env option's check as the one-line :class:`ConfigError`
    ``model.init_args.env: <message>`` (a ConfigError passes as it is). Why one place: the problem, its groups and
    the residual's controller (control/residual.py) are checked apart, and their messages read the same."""
    try:
        yield
    except ConfigError:
        raise
    except (ValueError, TypeError) as error:
        raise ConfigError(f"{ENV_OPTION}: {error}") from error


@dataclass(frozen=True)
class Backend:
    """What simulates the problem (``env.backend``): speed, never results.

    ``train``/``evaluate``: "citylearn" (the reference simulator) or "twin" (envs/twin.py: the same physics as a
    batched torch program, bit-equal, ~300x faster in training and ~10x for a year's evaluation). A Gymnasium id
    runs on itself whatever these say.
    ``num_envs``: envs of the twin's batch; ``num_workers``: collection worker processes of CityLearn or a
    Gymnasium env (agents/collection.py; the twin batches instead); ``compile``: torch.compile the twin's step,
    bit-equal to the eager step (it compiles once per fit, then collects faster: whether that pays for a run's frame
    budget, docs/twin.md "The compiled twin").
    ``device``: where the training twin steps: "cpu", or "training", the device the agent trains on (the twin's
    tables, state and rollouts live there and a step makes no host synchronisation, so a GPU steps thousands of
    envs at once: envs/twin.py "The twin on the training device"). On a CPU run both are the same.
    ``data_root``: where the simulators' site data is built and cached: the site's CityLearn dataset (and each year
    of ``training.train_site_seeds`` and ``validation_site_seed``) under ``data_root/<name>``, built once and then
    read back (envs/site_data.py).
    """

    train: str = CITYLEARN
    evaluate: str = CITYLEARN
    num_envs: int = 1
    num_workers: int = 1
    compile: bool = False
    device: str = CPU
    data_root: str = "data"

    def __post_init__(self) -> None:
        with env_option_errors():
            self._check()

    def _check(self) -> None:
        for name in ("train", "evaluate"):
            if getattr(self, name) not in BACKENDS:
                raise ValueError(f"backend.{name} must be one of {BACKENDS}, got {getattr(self, name)!r}")
        if self.num_envs < 1:
            raise ValueError(f"backend.num_envs must be >= 1, got {self.num_envs}")
        if self.num_envs > 1 and self.train != TWIN:
            raise ValueError("backend.num_envs > 1 is the twin's batch: set backend.train: twin")
        if self.num_workers < 1:
            raise ValueError(f"backend.num_workers must be >= 1, got {self.num_workers}")
        if self.num_workers > 1 and self.train == TWIN:
            raise ValueError(
                "backend.num_workers > 1 is for CityLearn and Gymnasium envs: the twin batches with num_envs"
            )
        if self.compile and self.train != TWIN:
            raise ValueError("backend.compile compiles the twin's step: set backend.train: twin")
        if self.device not in TWIN_DEVICES:
            raise ValueError(f"backend.device must be one of {TWIN_DEVICES}, got {self.device!r}")
        if self.device == TRAINING_DEVICE and self.train != TWIN:
            raise ValueError("backend.device: training moves the twin to the training device: set backend.train: twin")


@dataclass(frozen=True)
class Episodes:
    """How the problem's episodes are drawn (``env.episodes``): the seed each reset gets, and a Gymnasium id's length.

    Why a group of its own: the seeds pick which episodes of the problem a run sees, not the problem (the site, the
    action layout and the objective are the same whichever episode is drawn) nor what simulates it (CityLearn and the
    twin reset episode k with the same seed). Every reset is seeded from an episode counter
    (envs/factory.py ``EpisodeSeeding``), so a run and its resume see the same episodes.

    ``seed``: training episode k is reset with ``seed + k`` (collection worker w's with
    ``seed + w * WORKER_SEED_STRIDE + k``; the twin's ``training.start: random`` draws its starts from it).
    ``eval_seed``: evaluation episode k is reset with ``eval_seed + k``: the same episodes at every evaluation.
    ``max_steps``: a Gymnasium id's episode length (None: the id's own limit); the Iquitos site's episode is its year
    (``training.episode_hours`` on the twin).
    """

    seed: int = 0
    eval_seed: int = 10_000
    max_steps: int | None = None

    def __post_init__(self) -> None:
        with env_option_errors():
            self._check()

    def _check(self) -> None:
        for name in ("seed", "eval_seed"):
            if getattr(self, name) < 0:
                raise ValueError(f"episodes.{name} must be >= 0 (a reset's seed), got {getattr(self, name)}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"episodes.max_steps must be >= 1 or null, got {self.max_steps}")


@dataclass(frozen=True)
class TrainingAids:
    """What the twin's training episodes add to the problem (``env.training``); evaluations never see any of it.

    ``start``: where training episodes start: "zero", "staggered" (env b of B at hour b x 8760 / B) or "random";
    ``episode_hours``: how long they run (None: to the year's end).
    ``start_peak``: where a ``tariff`` episode that starts after hour 0 starts its month-to-date peak: "reference"
    (the peak shaver's at that hour of the year, envs/start_peak.py, run by control/training_references.py) or "zero"
    (a fresh month).
    ``train_site_seeds``: train on these years of the site profile (its seed replaced: mall noise, cloudiness and
    EV sessions drawn afresh, built once each under ``backend.data_root``); env b runs year b % len. None: the site
    itself.
    ``reward_baseline``: "uncontrolled" or "rule": the reward minus that controller's at the same hour of the same
    year (a fixed series: the best policy is unchanged, envs/reward_baseline.py); "none": the objective's reward.
    ``critic_forecasts``: None (the critic sees what the actor sees) or "oracle" (also the coming hours' true PV
    and mall load, envs/hindsight.py: an asymmetric actor-critic; the actor still acts on ``forecasts``).
    ``stored_energy_value``: potential-based shaping with the stored energy valued at this much per kWh (PEN on
    tariff; on thesis in the reward's units x the site's largest import, objectives.shaping_scale) discounted with
    ``shaping_gamma`` (set it to the agent's gamma); 0: off.
    """

    start: str = "zero"
    episode_hours: int | None = None
    start_peak: str = "reference"
    train_site_seeds: list[int] | None = None
    reward_baseline: str = NO_BASELINE
    critic_forecasts: str | None = None
    stored_energy_value: float = 0.0
    shaping_gamma: float = 0.99

    def __post_init__(self) -> None:
        with env_option_errors():
            self._check()

    def _check(self) -> None:
        if self.start not in START_SCHEDULES:
            raise ValueError(f"training.start must be one of {START_SCHEDULES}, got {self.start!r}")
        if self.episode_hours is not None and self.episode_hours < 1:
            raise ValueError(f"training.episode_hours must be >= 1 or null, got {self.episode_hours}")
        check_start_peak(self.start_peak)
        check_reward_baseline(self.reward_baseline)
        check_critic_forecasts(self.critic_forecasts)
        if self.train_site_seeds is not None and not self.train_site_seeds:
            raise ValueError("training.train_site_seeds must list at least one seed (or be null: train on the site)")


@dataclass
class EnvConfig:
    """Which environment to build: the problem, with its :class:`Backend`, its :class:`Episodes` and the twin's
    :class:`TrainingAids`.

    ``name`` is ``"iquitos"`` (the site described by ``site``) or any Gymnasium id such as ``"Pendulum-v1"``.
    """

    name: str = IQUITOS
    site: str = "configs/site/iquitos-2026.yaml"  # site profile YAML, used when name == "iquitos"
    # Iquitos action layout (envs/actions.py): "per_socket" (1 + sockets), "fleet" (BESS, EV fleet),
    # "self_consumption_window" (the share of the hour's surplus or load the BESS takes over, 0 idle: one share for
    # surplus hours, one for the peak window, one for the others, then the EV fleet; the card's)
    layout: str = "per_socket"
    # Iquitos: the controller of control/ a residual agent acts around (control/residual.py: the agent's action mapped
    # around the controller's, 0 is the controller): "rule" (the rule-based controller) or "shaver" (the peak shaver),
    # both in the "fleet" layout; None: the agent acts alone. Built above the env by agents/site_envs.py.
    residual: str | None = None
    # self_consumption_window only: BESS actions within this of 0 idle, the rest of each half stretched back
    # onto it, so idling is a range a wandering policy mean stays in, not a point (envs/self_consumption.py); 0: none
    idle_band: float = 0.0
    ev_guarantee: bool = True  # Iquitos: every EV gets at least the least-laxity minimum that serves it in time
    # Iquitos observation layout (envs/site_tables.py): "full" (four columns per socket), "compact" (a few fleet sums
    # instead, no constant column) or "auto": compact for every layout but per_socket, whose actions are per socket
    observation: str = AUTO
    objective: str = "thesis"  # Iquitos reward: "thesis" (the seed weights) or "tariff" (the bill, envs/objectives.py)
    # tariff only: the period whose peak-window maximum the reward's demand charge bills: "month" (the bill) or
    # "day" (a dense surrogate, the rate spread over the days; KPIs and the table still bill the month)
    demand_period: str = "month"
    # Iquitos: what the observation holds of the coming hours' PV and mall load, and what the priors plan with
    # (site/forecasts.py): "past_days" (the same hours of the previous 3 days: what a site has) or "oracle" (the
    # true series, as CityLearn's predictions: an upper bound for value-of-information rows)
    forecasts: str = PAST_DAYS
    # Iquitos: a third year of the site profile (its seed replaced, built like the training years) on which every
    # evaluation during training also runs, logged as ``select/*``: what picks the policy a run reports (the
    # evaluation with the best ``select/score`` is kept as ``best.ckpt``, ``final_test.policy: best``) without
    # looking at the evaluation year itself. None: no selection year.
    validation_site_seed: int | None = None
    backend: Backend = field(default_factory=Backend)
    episodes: Episodes = field(default_factory=Episodes)
    training: TrainingAids = field(default_factory=TrainingAids)

    def __post_init__(self) -> None:
        """Builds the groups from dicts (a checkpoint's hparams) and checks every field; a bad value is a
        :class:`ConfigError` (one line at the command line, not a trace through jsonargparse)."""
        with env_option_errors():
            if isinstance(self.backend, dict):
                self.backend = Backend(**self.backend)
            if isinstance(self.episodes, dict):
                self.episodes = Episodes(**self.episodes)
            if isinstance(self.training, dict):
                self.training = TrainingAids(**self.training)
            self._check()

    @property
    def on_twin(self) -> bool:
        """Whether training steps the twin (the Iquitos site with ``backend.train: twin``)."""
        return self.name == IQUITOS and self.backend.train == TWIN

    def _check(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if check_idle_band(self.idle_band) and self.layout not in SELF_CONSUMPTION_LAYOUTS:
            raise ValueError(f"idle_band is for the self_consumption_window action layout, not {self.layout!r}")
        if self.observation not in OBSERVATION_MODES:
            raise ValueError(f"observation must be one of {OBSERVATION_MODES}, got {self.observation!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.demand_period not in DEMAND_PERIODS:
            raise ValueError(f"demand_period must be one of {DEMAND_PERIODS}, got {self.demand_period!r}")
        check_forecasts(self.forecasts)
        if self.residual is not None and self.name != IQUITOS:
            raise ValueError("residual (a controller under the agent's action) needs the Iquitos site")
        if self.residual is not None and self.backend.device == TRAINING_DEVICE:
            raise ValueError(
                "residual with backend.device: training is not tested on a GPU yet: use backend.device cpu"
            )
        if self.backend.train == TWIN and self.name != IQUITOS:
            raise ValueError(f"backend.train: twin simulates the Iquitos site, not {self.name!r}")
        if self.episodes.max_steps is not None and self.name == IQUITOS:
            raise ValueError(
                "episodes.max_steps is a Gymnasium id's episode length: the Iquitos site's episode is its year "
                "(training.episode_hours on the twin)"
            )
        if self.training != TrainingAids() and not self.on_twin:
            defaults = TrainingAids()
            given = [f"training.{item.name}" for item in fields(TrainingAids)
                     if getattr(self.training, item.name) != getattr(defaults, item.name)]  # fmt: skip
            raise ValueError(
                f"{', '.join(given)}: the twin's training aids need backend.train: twin on the Iquitos site"
            )
        if self.training.train_site_seeds is not None:
            check_training_years(self)
        if self.validation_site_seed is not None:
            check_validation_year(self)

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> EnvConfig:
        """An env config from a dict: nested (``backend``, ``episodes``, ``training``) or the flat keys of checkpoints
        written before the options had groups (``actions``, ``backend: twin``, ``num_envs``, ``seed``, ``start``...:
        the table of envs/moved_keys.py), so an earlier run's checkpoint keeps its env when its hparams are read."""
        problem = {item.name for item in fields(cls)} - set(ENV_GROUPS)
        config: dict[str, Any] = {}
        groups = {name: dict(values[name]) if isinstance(values.get(name), dict) else {} for name in ENV_GROUPS}
        groups[""] = config
        for key, value in values.items():
            value_moved = GROUPS_THAT_WERE_VALUES.get(key) if isinstance(value, str) else None  # backend: twin
            moved = MOVED_ENV_KEYS.get(key) or value_moved
            if key in problem:
                config[key] = value
            elif moved is not None:
                group, _, name = moved.rpartition(".")
                groups[group][name] = value
        return cls(
            **config,
            backend=Backend(**groups["backend"]),
            episodes=Episodes(**groups["episodes"]),
            training=TrainingAids(**groups["training"]),
        )


def check_training_years(config: EnvConfig) -> None:
    """Training years must leave out the site's own year, the one evaluations and tables report: a run trained on
    it would report a memorised year as if it were unseen (a policy closed 56 % on its training year and 19 % on
    another year of the same profile)."""
    reported = site_config_of(config.site).seed
    if reported in (config.training.train_site_seeds or []):
        raise ValueError(
            f"training.train_site_seeds includes {reported}, the site's own year, the one evaluations report: "
            "train on other seeds (the card's: 2030-2033)"
        )


def check_validation_year(config: EnvConfig) -> None:
    """A selection year must be a year of the site that the run neither trains on nor reports."""
    seed = config.validation_site_seed
    if config.name != IQUITOS:
        raise ValueError("validation_site_seed (a selection year) needs the Iquitos site")
    if seed in (config.training.train_site_seeds or []):
        raise ValueError(
            f"validation_site_seed {seed} is also a training year (training.train_site_seeds): pick another"
        )
    if seed == site_config_of(config.site).seed:
        raise ValueError(
            f"validation_site_seed {seed} is the site's own year, the one evaluations report: pick another seed"
        )
