"""Actor and critic builders from TorchRL pieces (``MLP``, ``ProbabilisticActor``, ``TanhNormal``, ``ValueOperator``).

Why here: SAC, PPO and A2C share the same squashed-Gaussian actor and MLP critics; only what the
critic reads differs (observation for a state value, observation and action for a Q value).
Layers are lazy (``MLP`` infers its input size), so one call to :func:`initialise_lazy` with a fake
tensordict of the env materialises them before optimizers or checkpoints see the parameters.

The on-policy agents start their networks as CleanRL's and TorchRL's SOTA PPO scripts do (:func:`orthogonal_init`)
and give their policy one learned log-std per action (``policy_scale="parameter"``); SAC keeps PyTorch's default
init and a state-dependent scale, which its entropy-regularised objective relies on.
"""

from __future__ import annotations

import math

import torch
from tensordict.nn import AddStateIndependentNormalScale, NormalParamExtractor, TensorDictModule
from torch import nn
from torchrl.envs import EnvBase
from torchrl.modules import MLP, IndependentNormal, ProbabilisticActor, TanhNormal, ValueOperator

from iquitos_lightning.envs.hindsight import HINDSIGHT
from iquitos_lightning.errors import ConfigError

# the Gaussian's scale: a network output, a learned or a fixed number per action, or gSDE's state-dependent noise
POLICY_SCALES = ("state", "parameter", "fixed", "gsde", "gsde_fixed")
GSDE_FEATURES_KEY = "gsde_features"  # the last hidden layer's output, which gSDE's noise is a function of
# the policy's distribution: a Gaussian squashed by tanh onto the action bounds, or a plain Gaussian whose samples the
# env clips to the bounds (CleanRL's and Stable-Baselines3's PPO/A2C); see make_actor
DISTRIBUTIONS = ("tanh_normal", "normal")
HIDDEN_GAIN = math.sqrt(2)  # orthogonal init of hidden layers (CleanRL's layer_init default)
POLICY_OUTPUT_GAIN = 0.01  # the policy's mean starts near 0 for every observation
VALUE_OUTPUT_GAIN = 1.0

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "silu": nn.SiLU}


def activation_class(name: str) -> type[nn.Module]:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def make_actor(
    env: EnvBase,
    hidden_sizes: tuple[int, ...],
    activation: str = "relu",
    *,
    return_log_prob: bool = True,
    initial_scale: float = 1.0,
    policy_scale: str = "state",
    distribution: str = "tanh_normal",
) -> ProbabilisticActor:
    """A TanhNormal policy bounded by the env's action spec (or, ``distribution="normal"``, a plain Gaussian).

    ``initial_scale`` is the Gaussian's scale (before the tanh) for a zero network output: 1 spreads a fresh
    policy over the whole action range; a residual policy (:func:`zero_policy_mean`) explores near its rule
    with a smaller one (0.1: about a tenth of the range either way).

    ``policy_scale``: ``"state"``, the network outputs mean and scale (softplus-mapped); ``"parameter"``, it
    outputs the mean only and the scale is ``exp`` of one learned log-std per action (TensorDict's
    ``AddStateIndependentNormalScale``, CleanRL's ``actor_logstd``), started at ``initial_scale``. Why the
    parameter for PPO and A2C: exploration then shrinks only as fast as the policy gradient moves that one
    number, not with every change of the hidden layers, the layout CleanRL's and TorchRL's PPO results use.
    ``"fixed"``: that number stays ``initial_scale`` (a buffer, not a parameter: in the checkpoint, never
    trained). Why: A2C's learned scale drifted up as it trained (0.78 -> 1.03 on the tariff site), its sampled
    actions piled up at the bounds and the deterministic policy it is evaluated with moved away from what it
    explored with; a fixed scale keeps exploration where it started (SB3's A2C keeps ``log_std`` learned, the
    schedules of fixed-noise methods do not). ``"gsde"``: generalized state-dependent exploration, the noise a
    function of the last hidden features (:class:`StateDependentNoiseHead`; PPO/A2C, TanhNormal only);
    ``"gsde_fixed"``: the same with its noise weights kept at their start (a buffer), as ``"fixed"`` keeps the log-std.

    ``return_log_prob`` writes ``action_log_prob`` at collection, which PPO/A2C's ratio and entropy read;
    SAC's loss samples its own actions and log-probabilities, so SAC turns it off: one log-prob less per
    collected frame, on the worker's critical path. The bounds come from the unbatched spec, so a batched
    env (the twin) gives [A] bounds that broadcast over any minibatch.

    ``distribution="normal"``: the Gaussian's samples are the actions as stored, and the env clips them to the
    bounds (every env of this package does; CleanRL's ``ClipAction``, Stable-Baselines3's default for PPO/A2C); the
    deterministic action is the mean, clipped. Why, for A2C: with the tanh, a sample whose tanh rounds to a bound in
    float32 comes back from ``atanh`` as another pre-image, and its recomputed log-probability is off by several nats
    although the policy did not change (agents/health.py ``approximate_kl``). PPO's clipped ratio drops such samples
    from the gradient; A2C's one unclipped step takes their wrong score at full weight, and on the tariff site its
    policy ran into the bounds (90 % of sampled actions there, KL NaN after 2.75 M frames). A plain Gaussian's
    log-probability is exact everywhere.
    """
    action_dim = env.action_spec.shape[-1]
    if initial_scale <= 0:
        raise ValueError(f"initial_scale must be positive, got {initial_scale}")
    if policy_scale not in POLICY_SCALES:
        raise ConfigError(f"model.policy_scale must be one of {POLICY_SCALES}, got {policy_scale!r}")
    if distribution not in DISTRIBUTIONS:
        raise ConfigError(f"model.distribution must be one of {DISTRIBUTIONS}, got {distribution!r}")
    if policy_scale in ("gsde", "gsde_fixed"):
        network, out_keys = (
            gsde_network(action_dim, hidden_sizes, activation, initial_scale, distribution, policy_scale == "gsde"),
            ["loc", "scale", GSDE_FEATURES_KEY],
        )
    else:
        network, out_keys = (
            _mean_and_scale_network(action_dim, hidden_sizes, activation, initial_scale, policy_scale),
            ["loc", "scale"],
        )
    spec = env.action_spec_unbatched
    squashed = distribution == "tanh_normal"
    return ProbabilisticActor(
        TensorDictModule(network, in_keys=["observation"], out_keys=out_keys),
        in_keys=["loc", "scale"],
        spec=spec,
        distribution_class=TanhNormal if squashed else IndependentNormal,
        distribution_kwargs={"low": spec.space.low, "high": spec.space.high} if squashed else {},
        return_log_prob=return_log_prob,
    )


def _mean_and_scale_network(
    action_dim: int, hidden_sizes: tuple[int, ...], activation: str, initial_scale: float, policy_scale: str
) -> nn.Module:
    """An MLP to the mean (and, ``"state"``, the scale) with the scale layer of ``policy_scale``."""
    outputs = 2 * action_dim if policy_scale == "state" else action_dim
    body = MLP(out_features=outputs, num_cells=list(hidden_sizes), activation_class=activation_class(activation))
    if policy_scale == "state":
        # biased_softplus_<s>: a zero output maps to scale s, and the scale never reaches zero.
        scale: nn.Module = NormalParamExtractor(scale_mapping=f"biased_softplus_{initial_scale}")
    else:
        scale = AddStateIndependentNormalScale(
            action_dim,
            scale_mapping="exp",
            init_value=math.log(initial_scale),
            make_param=policy_scale == "parameter",
        )
    return nn.Sequential(body, scale)


def gsde_network(
    action_dim: int,
    hidden_sizes: tuple[int, ...],
    activation: str,
    initial_scale: float,
    distribution: str,
    learn_sigma: bool = True,
) -> nn.Module:
    """The hidden layers (activated to the last), then :class:`StateDependentNoiseHead`: mean, scale, features."""
    if not hidden_sizes:
        raise ConfigError("model.policy_scale 'gsde' draws its noise over the last hidden layer: give hidden_sizes")
    if distribution != "tanh_normal":
        raise ConfigError(
            "model.policy_scale 'gsde' needs model.distribution 'tanh_normal' (its noise is drawn by the collection "
            f"sampler of that distribution), got {distribution!r}"
        )
    *inner, features = hidden_sizes
    body = MLP(
        out_features=features,
        num_cells=list(inner),
        activation_class=activation_class(activation),
        activate_last_layer=True,
    )
    return nn.Sequential(body, StateDependentNoiseHead(features, action_dim, initial_scale, learn_sigma))


class StateDependentNoiseHead(nn.Module):
    """gSDE's policy head (Raffin, Kober & Stulp 2021; Stable-Baselines3's ``StateDependentNoiseDistribution`` with
    ``full_std``): the mean is a linear map of the last hidden features ``f``, and the exploration noise another,
    ``f @ (sigma * W)``, whose matrix ``W`` (standard normal, one per env) the collection sampler draws and holds
    for ``rollout.noise_hold_steps`` steps (fastpath/tanh_normal.py). Given the state, that noise is Gaussian with
    scale ``sqrt(f**2 @ sigma**2)`` per action, which is the scale this head outputs: the policy's density, its
    log-probabilities and its losses are the TanhNormal ones of every other layout.

    Why: a draw held for a day (``policy_scale`` "parameter" with ``noise_hold_steps`` 24) shifts the battery's
    action the same way at every hour of that day, so charging more at noon comes with discharging less in the
    evening, and the two effects can cancel in the policy gradient. gSDE's deviation is a function of the state:
    held for a day, it can charge more at noon *and* discharge more in the evening. Measured with A2C on the tariff
    site (docs/experiments.md, 2026-11-26): no better than the held draw, with sigma learned or kept. As in
    Stable-Baselines3 the features enter the scale detached (the scale is learned through ``sigma`` only), and
    ``sigma`` starts at ``initial_scale / sqrt(features)``: the scale is ``initial_scale`` where the features have
    unit mean square. ``learn_sigma`` False keeps ``sigma`` there (a buffer): the learned one grew
    0.50 -> 1.41 on the tariff site with A2C and drove 46 % of the sampled actions to the bounds.
    """

    def __init__(self, features: int, actions: int, initial_scale: float, learn_sigma: bool = True) -> None:
        super().__init__()
        self.mean = nn.Linear(features, actions)
        log_sigma = torch.full((features, actions), math.log(initial_scale / math.sqrt(features)))
        if learn_sigma:
            self.log_sigma = nn.Parameter(log_sigma)
        else:  # kept at its start: in the checkpoint, never trained (policy_scale "gsde_fixed")
            self.register_buffer("log_sigma", log_sigma)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        variance = features.detach().square() @ self.log_sigma.exp().square()
        return self.mean(features), variance.clamp_min(1e-12).sqrt(), features

    def noise_shape(self, features: torch.Tensor) -> torch.Size:
        """The shape of the standard-normal matrices ``W`` for a batch of ``features``: one per row."""
        return torch.Size((*features.shape[:-1], *self.log_sigma.shape))

    def standard_noise(self, features: torch.Tensor, scale: torch.Tensor, draw: torch.Tensor) -> torch.Tensor:
        """The noise ``f @ (sigma * W)`` in units of ``scale``: what the sampler adds as ``scale x noise``."""
        deviation = (features.detach().unsqueeze(-2) @ (self.log_sigma.exp() * draw)).squeeze(-2)
        return deviation / scale


@torch.no_grad()
def zero_policy_mean(actor: ProbabilisticActor) -> None:
    """Zero the actor's output layer: its mean action is then 0 for every observation, and its scale the
    ``initial_scale`` of :func:`make_actor`.

    Why: for a residual agent (``env.residual: rule``) action 0 *is* the reference controller, so a
    policy started here behaves exactly like the rule before it learns; an untrained network's mean is a few
    hundredths off 0 in every hour, which costs a full year of thesis return 36 points (-731.8 vs -696.0).
    The hidden layers keep their random weights, so gradients still reach them once the output layer moves.
    Call after :func:`initialise_lazy` (lazy layers have no weights before).
    """
    output = linear_layers(actor)[-1]
    output.weight.zero_()
    output.bias.zero_()


def linear_layers(module: nn.Module) -> list[nn.Linear]:
    """``module``'s linear layers in order (the last is the output layer). Call after :func:`initialise_lazy`."""
    layers = [layer for layer in module.modules() if isinstance(layer, nn.Linear)]
    if not layers:
        raise ValueError("no linear layers: call initialise_lazy first")
    return layers


@torch.no_grad()
def orthogonal_init(module: nn.Module, output_gain: float, hidden_gain: float = HIDDEN_GAIN) -> None:
    """Orthogonal weights and zero biases: ``hidden_gain`` for the hidden layers, ``output_gain`` for the output.

    Why (CleanRL's ``layer_init``, TorchRL's SOTA PPO): orthogonal matrices keep the activations' scale through
    the layers, a policy output gain of 0.01 starts the mean at about 0 for every observation (the exploration is
    the scale's, not a random tilt of the untrained network), and a value output gain of 1 starts the critic's
    predictions on the scale of its (normalised) targets. Draws from torch's global RNG.
    """
    layers = linear_layers(module)
    for layer in layers:
        nn.init.orthogonal_(layer.weight, gain=hidden_gain if layer is not layers[-1] else output_gain)
        nn.init.zeros_(layer.bias)


def critic_inputs(env: EnvBase) -> list[str]:
    """What a critic reads of a state: the observation, and the hindsight where the training env writes it
    (``env.training.critic_forecasts``, envs/hindsight.py: an asymmetric actor-critic; the actor reads the
    observation only)."""
    return ["observation", HINDSIGHT] if HINDSIGHT in env.observation_spec.keys() else ["observation"]


def make_q_value(env: EnvBase, hidden_sizes: tuple[int, ...], activation: str = "relu") -> ValueOperator:
    """Q(critic inputs, action) -> ``state_action_value`` (TorchRL's MLP concatenates its inputs in this order)."""
    network = MLP(out_features=1, num_cells=list(hidden_sizes), activation_class=activation_class(activation))
    return ValueOperator(network, in_keys=[*critic_inputs(env), "action"], out_keys=["state_action_value"])


def make_state_value(env: EnvBase, hidden_sizes: tuple[int, ...], activation: str = "tanh") -> ValueOperator:
    """V(critic inputs) -> ``state_value``."""
    network = MLP(out_features=1, num_cells=list(hidden_sizes), activation_class=activation_class(activation))
    return ValueOperator(network, in_keys=critic_inputs(env), out_keys=["state_value"])


@torch.no_grad()
def initialise_lazy(env: EnvBase, *modules: TensorDictModule) -> None:
    """Run each module once on a fake step so lazy layers get their shapes."""
    fake = env.fake_tensordict()
    for module in modules:
        module(fake.clone())


def parameter_count(*modules: nn.Module) -> int:
    return sum(p.numel() for module in modules for p in module.parameters())
