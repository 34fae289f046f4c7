"""Collection-time sampling of the TanhNormal actor, with the actor's own numbers and a fraction of its cost.

Why: a collected frame calls the exploration policy once on a single observation. Through TorchRL's
``ProbabilisticActor`` that call builds a ``TanhNormal`` (a ``TransformedDistribution`` of an
``Independent`` ``Normal``, its transforms and weak references) and goes through three TensorDict
module wrappers and an ``autograd.Function`` that inspects its own signature: about 0.85 ms at the
38-socket site, of which the 64x64 network is 0.11 ms, i.e. ~10 % of a worker's frame and the biggest
per-frame cost of ours after CityLearn itself (docs/performance.md).

:class:`TanhNormalSampler` runs the actor's own network and then the very tensor operations that
``TanhNormal.rsample_and_log_prob`` runs (the same standard-normal draw from the same RNG, TorchRL's
safe tanh clamp, the bounds' affine map, the Normal log-density minus the same log-Jacobian), writing
the keys the actor writes. ``tests/fastpath/test_tanh_normal.py`` checks the actions and log-probabilities
equal to the actor's, bit for bit, for symmetric and asymmetric bounds. Only random sampling takes this
path: under any other exploration type (evaluation is deterministic) the call goes to the actor itself,
and so does an actor this module does not recognise (:func:`collection_policy`).

The same operations serve the lean losses (fastpath/lean_sac_loss.py, fastpath/lean_ppo_loss.py), which call them on a
batch instead of building a ``TanhNormal`` per call: :func:`rsample_and_log_prob` (SAC's draws, with gradients:
TorchRL's safe-tanh function and its order of operations, so autograd's sums match too) and :func:`log_prob` (PPO's
scores of collected actions). The same test file pins both, values and gradients, bit for bit.

What it relies on: ``ProbabilisticActor``'s layout (``module[0]`` the network, ``module[1]`` the sampling
module with ``distribution_class``/``distribution_kwargs``) and ``TanhNormal``'s arithmetic, pinned by the
bit-equality test; checked at import: the sampling module still exposes those attributes.
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDictBase
from tensordict.nn import ProbabilisticTensorDictModule, TensorDictModule, TensorDictModuleBase
from torch.nn.functional import softplus
from torchrl.envs.utils import ExplorationType, exploration_type
from torchrl.modules import ProbabilisticActor, TanhNormal
from torchrl.modules.distributions.utils import safetanh_noeps

from iquitos_lightning.errors import ConfigError
from iquitos_lightning.fastpath.pins import require


def _probe_sampling_module() -> object:
    """The sampling module of a minimal TanhNormal actor (what :func:`samples_like_tanh_normal` inspects)."""
    network = TensorDictModule(lambda obs: (obs, obs.exp()), in_keys=["observation"], out_keys=["loc", "scale"])
    actor = ProbabilisticActor(network, in_keys=["loc", "scale"], distribution_class=TanhNormal, return_log_prob=True)
    return actor.module[1]


require(
    _probe_sampling_module(),
    ["distribution_class", "distribution_kwargs", "return_log_prob", "log_prob_key", "out_keys"],
    library="torchrl",
    override=__name__,
)

_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))  # as torch's Normal.log_prob writes it
_LOG_2 = math.log(2.0)


def samples_like_tanh_normal(actor: object) -> bool:
    """Whether ``actor`` is a ``ProbabilisticActor`` (network -> loc, scale) over a plain ``TanhNormal``
    with at most ``low``/``high`` set and no projection onto its spec (``safe=False``, the default): the one
    shape :class:`TanhNormalSampler` reproduces."""
    if not isinstance(actor, ProbabilisticActor) or len(actor.module) != 2:
        return False
    sampling = actor.module[1]
    return (
        sampling.distribution_class is TanhNormal
        and not getattr(sampling, "safe", False)
        and set(sampling.distribution_kwargs) <= {"low", "high"}
        and len(actor.module[0].in_keys) == 1
        and (len(actor.module[0].out_keys) == 2 or state_dependent_noise_head(actor) is not None)
    )


def state_dependent_noise_head(actor: ProbabilisticActor) -> torch.nn.Module | None:
    """The gSDE head of ``actor`` (agents/networks.py ``StateDependentNoiseHead``: its network outputs loc, scale and
    the features the noise is a function of, and its last module draws that noise), else None. Recognised by what
    it does (``noise_shape``, ``standard_noise``), so that this layer does not import the agents'."""
    network = actor.module[0]
    module = getattr(network, "module", None)
    head = module[-1] if isinstance(module, torch.nn.Sequential) and len(module) else None
    if len(network.out_keys) == 3 and hasattr(head, "noise_shape") and hasattr(head, "standard_noise"):
        return head
    return None


class TanhNormalSampler(TensorDictModuleBase):
    """Samples ``actor``'s action (and log-probability) in random exploration; anything else goes to ``actor``.

    ``noise_hold_steps`` > 1 keeps each env's standard-normal draw for that many calls (steps of a batched env)
    before drawing again: the action is still ``tanh(loc + scale x noise)`` with the state's own loc and scale and its
    log-probability the same density, but the deviation from the policy's mean persists for hours. With a gSDE head
    (:func:`state_dependent_noise_head`) the held draw is the head's noise matrix per env, and the noise of a step is
    the head's function of that step's features: the deviation persists as a function of the state. Why: on the site,
    what pays (keeping the battery for the evening peak) is a deviation held over many hours; noise drawn afresh
    every hour averages out before its effect shows, and A2C's one gradient step per rollout did not move the policy
    from where it started in eighteen pilots (docs/experiments.md). SB3's gSDE samples its exploration matrix every
    n steps for the same reason. The held draw is this process's sampler state: not in checkpoints (a resumed run
    draws afresh) and not shared between workers.
    """

    def __init__(self, actor: ProbabilisticActor, noise_hold_steps: int = 1) -> None:
        if not samples_like_tanh_normal(actor):
            raise TypeError("TanhNormalSampler takes a ProbabilisticActor over TanhNormal(loc, scale[, low, high])")
        if noise_hold_steps < 1:
            raise ValueError(f"noise_hold_steps must be at least 1, got {noise_hold_steps}")
        super().__init__()
        self.actor = actor
        self.noise_hold_steps = noise_hold_steps
        self._held_noise: torch.Tensor | None = None
        self._calls_since_draw = 0
        parameters, sampling = actor.module[0], actor.module[1]
        self.in_keys = list(parameters.in_keys)
        self.out_keys = list(actor.out_keys)
        self._observation_key = parameters.in_keys[0]
        self._loc_key, self._scale_key, *self._feature_keys = parameters.out_keys
        self._head = state_dependent_noise_head(actor)
        self._action_key = sampling.out_keys[0]
        self._log_prob_key = sampling.log_prob_key if sampling.return_log_prob else None
        self._bounds = CachedSquashingBounds()  # read at each call: the actor's bounds move with the agent

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if exploration_type() is not ExplorationType.RANDOM:
            return self.actor(tensordict)
        network = self.actor.module[0].module  # looked up, not stored: a second name would register it twice
        loc, scale, *features = network(tensordict.get(self._observation_key))
        bounds = self._bounds(self.actor.module[1].distribution_kwargs)
        if self._head is not None:
            draw = self._held_draw(self._head.noise_shape(features[0]), features[0])
            noise = self._head.standard_noise(features[0], scale, draw)
        else:
            noise = self._noise_like(loc)
        action, log_prob = rsample_and_log_prob(loc, scale, bounds, noise)
        tensordict.set(self._loc_key, loc)
        tensordict.set(self._scale_key, scale)
        for key, value in zip(self._feature_keys, features, strict=True):
            tensordict.set(key, value)
        tensordict.set(self._action_key, action)
        if self._log_prob_key is not None:
            tensordict.set(self._log_prob_key, log_prob)
        return tensordict

    def _noise_like(self, loc: torch.Tensor) -> torch.Tensor | None:
        """The held standard-normal draw, drawn again every ``noise_hold_steps`` calls (or when the batch changes);
        None when every call draws its own (what TanhNormal does)."""
        if self.noise_hold_steps == 1:
            return None
        return self._held_draw(loc.shape, loc)

    def _held_draw(self, shape: torch.Size, like: torch.Tensor) -> torch.Tensor:
        """A standard-normal draw of ``shape`` (``like``'s dtype and device), kept for ``noise_hold_steps`` calls
        (drawn again when it is due or the shape changes)."""
        held = self._held_noise
        if held is None or held.shape != shape or self._calls_since_draw >= self.noise_hold_steps:
            held = self._held_noise = like.new_empty(shape).normal_()
            self._calls_since_draw = 0
        self._calls_since_draw += 1
        return held


class DeterministicTanhNormalPolicy(TensorDictModuleBase):
    """``actor``'s deterministic action (the Gaussian mean through the safe tanh and the bounds' map), computed as
    ``TanhNormal.deterministic_sample`` computes it, without building the distribution or scoring the action.

    Why: evaluation steps one env through a whole year, 8,760 sequential calls of the policy on one observation, and
    through ``ProbabilisticActor`` each call builds a ``TanhNormal`` and, where the actor returns log-probabilities
    (PPO, A2C), scores the deterministic action by inverting the tanh; evaluation reads neither. Writes the actor's
    network outputs and the action (no log-probability): what an evaluation rollout keeps. The actions equal the
    actor's under ``ExplorationType.DETERMINISTIC`` bit for bit (tests/fastpath/test_tanh_normal.py)."""

    def __init__(self, actor: ProbabilisticActor) -> None:
        if not samples_like_tanh_normal(actor):
            raise TypeError("DeterministicTanhNormalPolicy takes a ProbabilisticActor over TanhNormal")
        super().__init__()
        self.actor = actor
        parameters = actor.module[0]
        self.in_keys = list(parameters.in_keys)
        self.out_keys = [*parameters.out_keys, actor.module[1].out_keys[0]]
        self._observation_key = parameters.in_keys[0]
        self._network_keys = list(parameters.out_keys)
        self._action_key = actor.module[1].out_keys[0]
        self._bounds = CachedSquashingBounds()

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        outputs = self.actor.module[0].module(tensordict.get(self._observation_key))
        for key, value in zip(self._network_keys, outputs, strict=True):
            tensordict.set(key, value)
        bounds = self._bounds(self.actor.module[1].distribution_kwargs)
        tensordict.set(self._action_key, deterministic_action(outputs[0], bounds))
        return tensordict


def deterministic_action(loc: torch.Tensor, bounds: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
    """``TanhNormal(loc, scale, low, high).deterministic_sample``'s operations: TorchRL's safe tanh of the mean (its
    no-gradient form, as :func:`rsample_and_log_prob`), then the affine map of :func:`squashing_bounds`."""
    return _to_bounds(_safe_tanh(loc), bounds)


def evaluation_policy(policy: TensorDictModuleBase) -> TensorDictModuleBase:
    """What a deterministic evaluation runs for ``policy``: a :class:`DeterministicTanhNormalPolicy` over it when it
    is a TanhNormal actor, else ``policy`` itself. Built per evaluation: stored on an agent it would register the
    actor a second time in the agent's ``state_dict``."""
    return DeterministicTanhNormalPolicy(policy) if samples_like_tanh_normal(policy) else policy


def network_then_distribution(actor: object) -> bool:
    """Whether ``actor`` is what :func:`distribution_parameters` reads: a ``ProbabilisticActor`` of one
    ``TensorDictModule`` network with a tuple of outputs (a single output comes back as a tensor) followed by one
    distribution module that reads only those outputs."""
    if not isinstance(actor, ProbabilisticActor) or len(actor.module) != 2:
        return False
    network, sampling = actor.module[0], actor.module[-1]
    if not isinstance(network, TensorDictModule) or not isinstance(sampling, ProbabilisticTensorDictModule):
        return False
    return len(network.out_keys) >= 2 and set(sampling.in_keys) <= set(network.out_keys)


def distribution_parameters(actor: ProbabilisticActor, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    """The keyword arguments ``actor``'s distribution is built from, by its network called on ``inputs`` (the
    tensors of its ``in_keys``): what ``ProbabilisticTensorDictModule.get_dist`` reads, without the tensordicts."""
    network, sampling = actor.module[0], actor.module[-1]
    outputs = dict(zip(network.out_keys, network.module(*inputs), strict=True))
    return {name: outputs[key] for name, key in zip(sampling.dist_keys, sampling.in_keys, strict=True)}


def squashing_bounds(distribution_kwargs: dict) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The affine map TanhNormal adds after the tanh, as (center, half range) of ``[low, high]``; None when both
    bounds are the unit ones (TanhNormal then adds none)."""
    low = torch.as_tensor(distribution_kwargs.get("low", -1.0))
    high = torch.as_tensor(distribution_kwargs.get("high", 1.0))
    if not bool((high != 1.0).any() or (low != -1.0).any()):
        return None
    return (high + low) / 2, (high - low) / 2


class CachedSquashingBounds:
    """:func:`squashing_bounds` of an actor's ``low``/``high``, computed again only when they are new tensors (a
    move to another device): the check whether they are the unit bounds reads the device, once."""

    def __init__(self) -> None:
        self._key: tuple[int, int] | None = None
        self._bounds: tuple[torch.Tensor, torch.Tensor] | None = None

    def __call__(self, distribution_kwargs: dict) -> tuple[torch.Tensor, torch.Tensor] | None:
        key = (id(distribution_kwargs.get("low")), id(distribution_kwargs.get("high")))
        if self._key != key:
            self._key, self._bounds = key, squashing_bounds(distribution_kwargs)
        return self._bounds


def rsample_and_log_prob(
    loc: torch.Tensor,
    scale: torch.Tensor,
    bounds: tuple[torch.Tensor, torch.Tensor] | None,
    noise: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``TanhNormal(loc, scale, low, high).rsample_and_log_prob()``'s tensor operations, in its order: one
    standard-normal draw, the safe tanh, the affine map of :func:`squashing_bounds`, the Normal log-density
    summed over the action minus the summed log-Jacobian. Values and gradients equal TanhNormal's bit for bit
    (tests/fastpath/test_tanh_normal.py): with gradients it uses TorchRL's safe-tanh function (its backward) and
    builds the log-density before the log-Jacobian, as TorchRL does, since autograd sums the paths into the
    pre-image in the order they were built (the other order moved the gradient's last bit). ``noise``: a given
    standard-normal draw instead of a fresh one (:class:`TanhNormalSampler`'s held noise)."""
    if noise is None:
        noise = torch.empty_like(loc).normal_()  # torch's Normal.rsample draws exactly this
    preimage = loc + noise * scale
    squashed = safetanh_noeps(preimage) if preimage.requires_grad else _safe_tanh(preimage)
    return _to_bounds(squashed, bounds), _log_density(preimage, loc, scale, bounds)


def _safe_tanh(preimage: torch.Tensor) -> torch.Tensor:
    """TorchRL's safe tanh without gradients: the tanh clamped one resolution short of +-1 (SafeTanhTransform)."""
    limit = 1.0 - torch.finfo(preimage.dtype).resolution
    return preimage.tanh().clamp(-limit, limit)


def _to_bounds(squashed: torch.Tensor, bounds: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
    """The affine map of :func:`squashing_bounds` from ``[-1, 1]`` to the actor's bounds (none for unit bounds)."""
    if bounds is None:
        return squashed
    return bounds[0].to(squashed.device) + bounds[1].to(squashed.device) * squashed


def collection_policy(actor: TensorDictModuleBase, noise_hold_steps: int = 1) -> TensorDictModuleBase:
    """What collectors run for ``actor``: a :class:`TanhNormalSampler` over it when it is a TanhNormal actor,
    else ``actor`` itself (which cannot hold its noise: refused for ``noise_hold_steps`` > 1)."""
    if samples_like_tanh_normal(actor):
        return TanhNormalSampler(actor, noise_hold_steps)
    if noise_hold_steps > 1:
        raise ConfigError(
            f"model.rollout.noise_hold_steps ({noise_hold_steps}) needs a TanhNormal policy (model.distribution: "
            "tanh_normal); this policy draws its own noise every step: set it to 1"
        )
    return actor


def log_prob(
    loc: torch.Tensor, scale: torch.Tensor, action: torch.Tensor, bounds: tuple[torch.Tensor, torch.Tensor] | None
) -> torch.Tensor:
    """``TanhNormal(loc, scale, low, high).log_prob(action)``'s tensor operations: the inverse of the affine map,
    TorchRL's safe inverse tanh, then :func:`_log_density` at that pre-image (the log-Jacobian recomputed from it, as
    ``ComposeTransform`` does). The action is data, so
    gradients reach ``loc`` and ``scale`` through the Normal log-density only: the library's graph, bit for bit."""
    if bounds is not None:
        center, half_range = bounds[0].to(loc.device), bounds[1].to(loc.device)
        squashed = (action - center) / half_range
    else:
        squashed = action
    limit = 1.0 - torch.finfo(squashed.dtype).resolution  # TorchRL's SafeTanhTransform inverse clamp
    preimage = squashed.clamp(-limit, limit).atanh()
    return _log_density(preimage, loc, scale, bounds)


def _log_density(
    preimage: torch.Tensor,
    loc: torch.Tensor,
    scale: torch.Tensor,
    bounds: tuple[torch.Tensor, torch.Tensor] | None,
) -> torch.Tensor:
    """TanhNormal's log-density at ``preimage``: the Normal log-density summed over the action minus the summed
    log-Jacobian of the tanh and the bounds' affine map. The Normal part is built first, as TorchRL builds it (with
    gradients through the pre-image, autograd sums the paths in the order they were built)."""
    normal = -((preimage - loc) ** 2) / (2 * scale**2) - scale.log() - _LOG_SQRT_2PI
    log_jacobian = 2.0 * (_LOG_2 - preimage - softplus(-2.0 * preimage))  # torch's TanhTransform
    if bounds is not None:
        log_jacobian = log_jacobian + bounds[1].to(loc.device).abs().log().expand(preimage.shape)
    return normal.sum(-1) - log_jacobian.sum(-1)
