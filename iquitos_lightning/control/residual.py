"""Residual policy learning as one wrapper above any env of the site: the agent's action mapped around a controller's.

Why: on the ``thesis`` reward the rule-based controller is within 0.3 % of the optimum, so an agent that must
rediscover it from random weights loses to it by noise alone; residual policy learning (Silver et al. 2018,
Johannink et al. 2019) starts the agent *at* a controller and leaves it the corrections. The env stays the control
problem (physics, observation, reward, layouts): :class:`ResidualAction`, a TorchRL transform, reads the hour the env
is at (``hour_context()``, public on the CityLearn env, the twin and the evaluation twin), asks the controller for
its action in the env's layout, and sends the env the agent's action mapped around it
(:func:`~iquitos_lightning.envs.actions.around_prior`: -1 and +1 the action's bounds, 0 the controller's action to the
bit). The agent, its replay buffer and its observation see only its own action; an untrained policy whose mean is
about 0 starts at the controller, and every KPI is the env's own.

The mapped action is computed in float64, as the simulators compute their actions, and handed on as float64 (both
simulators take it unrounded), so a zero residual is the controller's own run bit for bit
(tests/control/test_residual.py).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
from tensordict import TensorDictBase
from torchrl.envs import EnvBase, TransformedEnv
from torchrl.envs.transforms import Transform

from iquitos_lightning.control.fleet_rule import FLEET_RULE, FleetRule
from iquitos_lightning.control.peak_shaver import PEAK_SHAVER, PeakShaver
from iquitos_lightning.control.references import Controller
from iquitos_lightning.envs.actions import PER_SOCKET, around_prior
from iquitos_lightning.envs.arrays import Array
from iquitos_lightning.envs.env_config import env_option_errors
from iquitos_lightning.envs.factory import EnvConfig
from iquitos_lightning.envs.hour_context import HasHourContext, HourContext, hour_context_source
from iquitos_lightning.envs.state import SiteState

ACTION = "action"


class Prior(Protocol):
    """A controller a residual agent acts around: its action, in the env's layout ``layout``, for the hour."""

    name: str
    layout: str

    def act(self, hour: HourContext) -> Array: ...


# The controllers a run's ``env.residual`` may name (the rule-based controller on ``thesis``, the peak shaver on
# ``tariff``), each in the ``fleet`` layout its two actions live in.
PRIORS: dict[str, type[FleetRule] | type[PeakShaver]] = {FLEET_RULE: FleetRule, PEAK_SHAVER: PeakShaver}


class HasSiteState(Protocol):
    """One env that shows its physical state (the CityLearn env, envs/twin_site.py's ``TwinSite``)."""

    def state(self) -> SiteState: ...


class SiteStatePrior:
    """Any controller of control/references.py (``act(SiteState)`` -> the ``per_socket`` action of one env: rule-based,
    tariff rule, MPC...) as a residual's prior, reading the state from ``site``.

    Its action is rounded to float32 as :func:`~iquitos_lightning.control.rollout.run_controller` sends it, so a zero
    residual is the controller's own run.
    """

    layout = PER_SOCKET

    def __init__(self, controller: Controller, site: HasSiteState) -> None:
        self.controller = controller
        self.site = site
        self.name = controller.name

    def act(self, hour: HourContext) -> Array:
        """The controller's action [1 + S] for the state ``site`` is at (``hour`` says the same of it)."""
        return np.asarray(self.controller.act(self.site.state()), dtype=np.float32)


def prior_named(name: str) -> Prior:
    """The controller ``env.residual`` names; a ValueError listing the known ones otherwise."""
    if name not in PRIORS:
        raise ValueError(f"env.residual must be one of {tuple(PRIORS)} (or null), got {name!r}")
    return PRIORS[name]()


class ResidualAction(Transform):
    """The agent's ``action`` (in [-1, 1]) mapped around ``prior``'s action for the hour ``source`` is at."""

    def __init__(self, prior: Prior, source: HasHourContext) -> None:
        super().__init__()
        self.prior = prior
        self.source = source

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """What the env steps with: a shallow copy of ``tensordict`` whose action is the mapped one (the agent's own
        stays in ``tensordict``, which the collector keeps)."""
        stepped = tensordict.clone(False)
        stepped.set(ACTION, self.mapped_action(tensordict.get(ACTION)))
        return stepped

    def mapped_action(self, action: torch.Tensor) -> torch.Tensor:
        """The agent's ``action`` mapped around the prior's for the hour the env is at (float64)."""
        residual = action.to(torch.float64).clamp(-1.0, 1.0)  # as the simulators clip an action
        prior = torch.as_tensor(self.prior.act(self.source.hour_context()), dtype=torch.float64)
        return around_prior(residual, prior.to(residual.device).reshape(residual.shape))


def with_residual(env: EnvBase, prior: Prior, layout: str) -> TransformedEnv:
    """``env`` (an env of envs/factory.py in layout ``layout``) with the agent's action mapped around ``prior``'s."""
    if prior.layout != layout:
        raise ValueError(f"the {prior.name!r} controller acts in the {prior.layout!r} layout, the env in {layout!r}")
    return TransformedEnv(env, ResidualAction(prior, hour_context_source(env)))


def residual_around(env: EnvBase, config: EnvConfig) -> EnvBase:
    """``env`` (built from ``config`` by envs/factory.py) with ``config.residual``'s controller under the agent's
    action; ``env`` itself when the run has no residual."""
    if config.residual is None:
        return env
    with env_option_errors():  # a config's mistake: one line at the command line (errors.py)
        wrapped = with_residual(env, prior_named(config.residual), config.layout)
    return wrapped
