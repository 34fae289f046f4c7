"""Health signals of learning: the figures that show, in the first minutes of a run, whether an agent learns at all.

Why: losses alone do not say whether a policy moves or a critic fits. A PPO run on this site kept its untrained
policy for 786k frames while its losses looked ordinary; its critic's explained variance was 0.00 and its KL per
update ~0, which two logged numbers would have shown in the first minute. The signals, per rollout:

- every agent: the policy's Gaussian scale (before the tanh), its entropy per action dimension, and the share of
  actions at the ends of their range (a policy pinned at a bound has stopped exploring there);
- on-policy (PPO, A2C), from the rollout before its update: the critic's explained variance of the value targets
  (CleanRL's ``explained_var``: 0 means the advantages are raw reward-to-go noise), the scale of the advantages
  and of the value targets; from after its update: the approximate KL between the policy that collected the
  rollout and the policy that learnt from it (Schulman's k3 estimator, always >= 0, as CleanRL logs it) and the
  gradient norm before clipping;
- SAC, on one replay batch: both Q networks' mean and spread over the batch, their disagreement, the target
  networks' Q on the same pairs, and the actor's and critics' gradient norms of the last update.

Every function here is read-only (no gradient, no random draw: evaluating health never changes training) and
returns plain floats, recorded by the agents (:mod:`.health_signals`), logged under ``health/`` and drawn by the run
report.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.envs import ExplorationType, set_exploration_type
from torchrl.modules import ProbabilisticActor, TanhNormal

from iquitos_lightning.fastpath.tanh_normal import distribution_parameters, samples_like_tanh_normal, squashing_bounds
from iquitos_lightning.fastpath.tanh_normal import log_prob as tanh_normal_log_prob

HEALTH_PREFIX = "health/"  # what a health signal is logged under
# An action component within this fraction of its range's width from either end counts as "at the bound".
AT_BOUND_TOLERANCE = 0.01
# Pre-tanh Gaussian entropy per dimension is 0.5 * log(2 pi e) + log(scale).
_HALF_LOG_2PI_E = 0.5 * math.log(2 * math.pi * math.e)


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var(target - predicted) / Var(target) (1: perfect, 0: no better than the mean, < 0: worse)."""
    predicted, target = predicted.reshape(-1).double(), target.reshape(-1).double()
    total = target.var(correction=0)
    if total <= 0:
        return float("nan")
    return float(1.0 - (target - predicted).var(correction=0) / total)


def policy_spread(loc: torch.Tensor, scale: torch.Tensor, action: torch.Tensor, low: torch.Tensor, high: torch.Tensor):
    """Mean Gaussian scale, mean entropy per action dimension (nats, before the tanh) and the share of action
    components at a bound of ``[low, high]``."""
    width = (high - low).to(action)
    near = AT_BOUND_TOLERANCE * width
    at_bound = ((action - low.to(action)) <= near) | ((high.to(action) - action) <= near)
    return {
        "policy_scale": float(scale.mean()),
        "entropy_per_dim": float(_HALF_LOG_2PI_E + scale.log().mean()),
        "actions_at_bounds": float(at_bound.float().mean()),
    }


def action_bounds(actor: ProbabilisticActor) -> tuple[torch.Tensor, torch.Tensor]:
    """The actor's action bounds (those its TanhNormal maps onto, or the env clips a plain Gaussian's samples to)."""
    space = actor.spec["action"].space
    return torch.as_tensor(space.low), torch.as_tensor(space.high)


def squashed(actor: ProbabilisticActor) -> bool:
    """Whether the actor's Gaussian goes through a tanh onto its bounds (networks.make_actor's ``tanh_normal``)."""
    return issubclass(actor.module[1].distribution_class, TanhNormal)


def rollout_policy_spread(actor: ProbabilisticActor, data: TensorDictBase) -> dict[str, float]:
    """:func:`policy_spread` of the actions the collector took (their ``loc``/``scale`` are in the rollout)."""
    low, high = action_bounds(actor)
    return policy_spread(data["loc"], data["scale"], data["action"], low, high)


def critic_fit(data: TensorDictBase) -> dict[str, float]:
    """Explained variance of the value targets by the critic's values at collection, and the targets' and
    advantages' scale (read from a rollout after GAE, before any update)."""
    target, value = data["value_target"], data["state_value"]
    return {
        "explained_variance": explained_variance(value, target),
        "value_target_mean": float(target.mean()),
        "value_target_std": float(target.std(correction=0)),
        "advantage_std": float(data["advantage"].std(correction=0)),
    }


@torch.no_grad()
def approximate_kl(actor: ProbabilisticActor, data: TensorDictBase) -> float:
    """KL(collecting policy || current policy) on the rollout's actions, Schulman's k3 estimator: mean of
    ``(r - 1) - log r`` with ``r = pi_new(a) / pi_old(a)``.

    Actions with a component at a bound of the range (within :data:`AT_BOUND_TOLERANCE` of its width) are left
    out: there the tanh is saturated in float32, the pre-image TorchRL recovers by ``atanh`` is not the one that
    was sampled, and the recomputed log-probability is off by several nats although the policy did not change
    (measured: an A2C run whose first rollout had 2 % of its actions there read a "KL" of 9.6 before any update).
    The share left out is ``actions_at_bounds``' business. A plain Gaussian (``distribution="normal"``) keeps all."""
    low, high = action_bounds(actor)
    action = data["action"]
    near = AT_BOUND_TOLERANCE * (high - low).to(action)
    if squashed(actor):
        interior = (((action - low.to(action)) > near) & ((high.to(action) - action) > near)).all(-1)
    else:  # a plain Gaussian's log-probability is exact beyond the bounds too
        interior = torch.ones(action.shape[:-1], dtype=torch.bool, device=action.device)
    new_log_prob = current_log_prob(actor, data, action)
    log_ratio = (new_log_prob - data["action_log_prob"])[interior]
    log_ratio = log_ratio[torch.isfinite(log_ratio)]
    if log_ratio.numel() == 0:
        return float("nan")
    return float(((log_ratio.exp() - 1) - log_ratio).mean())


def current_log_prob(actor: ProbabilisticActor, data: TensorDictBase, action: torch.Tensor) -> torch.Tensor:
    """The actor's log-probability of ``action`` at ``data``'s inputs now. A TanhNormal actor's through TanhNormal's
    own operations on tensors (fastpath/tanh_normal.py ``log_prob``, the lean PPO loss's: the same bits without
    building the distribution; on A2C's 512-frame rollout 0.5 ms of the ~1.2 ms this signal cost), any other
    through the distribution."""
    if not samples_like_tanh_normal(actor):
        return actor.get_dist(data.select(*actor.in_keys)).log_prob(action)
    parameters = distribution_parameters(actor, *(data.get(key) for key in actor.module[0].in_keys))
    bounds = squashing_bounds(actor.module[-1].distribution_kwargs)
    return tanh_normal_log_prob(parameters["loc"], parameters["scale"], action, bounds)


def gradient_norm(parameters: Iterable[torch.Tensor]) -> torch.Tensor:
    """The global L2 norm of the parameters' current gradients (0 when none has one)."""
    gradients = [parameter.grad for parameter in parameters if parameter.grad is not None]
    if not gradients:
        return torch.zeros(())
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in gradients]))


@torch.no_grad()
def q_statistics(loss_module: torch.nn.Module, batch: TensorDictBase) -> dict[str, float]:
    """Twin-Q statistics of TorchRL's ``SACLoss`` on a replay batch: the mean and spread over the batch of the
    online Q networks' values, their mean disagreement, and the target networks' mean value on the same pairs."""
    network = loss_module.qvalue_network
    inputs = batch.select(*network.in_keys)
    values = {}
    for name, parameters in (
        ("online", loss_module.qvalue_network_params),
        ("target", loss_module.target_qvalue_network_params),
    ):
        per_network = []
        for index in range(parameters.batch_size[0]):
            with parameters[index].to_module(network):
                per_network.append(network(inputs.clone())["state_action_value"].reshape(-1))
        values[name] = torch.stack(per_network)
    online = values["online"]
    return {
        "q_mean": float(online.mean()),
        "q_std": float(online.std(dim=-1, correction=0).mean()),
        "q_twin_gap": float((online[0] - online[-1]).abs().mean()),
        "target_q_mean": float(values["target"].mean()),
    }


class DriftProbe:
    """How far a policy's deterministic actions moved over an evaluation period, on the period's first observations.

    Why a probe of its own: it is the one signal every agent has (KL needs the collecting policy's log-probabilities,
    which SAC does not store), and it reads 0.0 exactly when the policy did not change, whatever the reason (a
    learning rate of 0, an actor that waits for ``actor_delay_frames``, updates skipped as non-finite).
    """

    ROWS = 256  # observations kept, evenly spaced over the rollout

    def __init__(self, observations: torch.Tensor, actions: torch.Tensor, half_range: torch.Tensor) -> None:
        self.observations = observations
        self.actions = actions
        self.half_range = half_range

    @classmethod
    def of(cls, policy: ProbabilisticActor, rollout: TensorDictBase) -> DriftProbe:
        observations = rollout["observation"].reshape(-1, rollout["observation"].shape[-1])
        step = max(observations.shape[0] // cls.ROWS, 1)
        observations = observations[::step][: cls.ROWS].clone()
        low, high = action_bounds(policy)
        return cls(observations, deterministic_actions(policy, observations), (high - low) / 2)

    def drift(self, policy: ProbabilisticActor) -> float:
        """Mean absolute change of the deterministic action, in half-widths of the action range."""
        moved = (deterministic_actions(policy, self.observations) - self.actions).abs()
        return float((moved / self.half_range.to(moved)).mean())


@torch.no_grad()
def deterministic_actions(policy: ProbabilisticActor, observations: torch.Tensor) -> torch.Tensor:
    """The policy's deterministic actions (the TanhNormal's mode) for a batch of observations, on the CPU."""
    device = next(policy.parameters()).device
    inputs = TensorDict({"observation": observations.to(device)}, batch_size=[observations.shape[0]])
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        return policy(inputs)["action"].detach().cpu()
