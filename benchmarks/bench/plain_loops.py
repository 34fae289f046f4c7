"""PPO, A2C and SAC as plain PyTorch loops on the twin: the yardstick the learner section holds our agents to.

Why: the twin steps 64 envs in a millisecond or two, so what a training run costs is the learner's own code.
To know how much of it is ours (Lightning, TorchRL's collector and losses, our health signals and logging) a
run needs a reference that does the same algorithm with nothing around it. These are CleanRL's
``ppo_continuous_action.py`` and ``sac_continuous_action.py`` in shape (one function, tensors in preallocated
buffers, the update written out), acting on the raw twin through its TorchRL API (``reset``, ``step``,
partial ``reset`` with ``_reset``), with the math our agents run at the same settings:

- the same networks (MLPs of ``hidden_sizes`` with the same activation; a tanh-squashed Gaussian policy whose
  scale is a network output through TensorDict's ``biased_softplus_1.0`` or one learned log-std per action),
  the same initialisation (orthogonal or torch's default), the same optimizers (Adam, ``foreach``, the same
  learning rates) and gradient clip;
- PPO/A2C: the same rollout (``frames_per_batch`` frames of all envs), values of the observations and next
  observations in one batch each, GAE bootstrapping through truncations (``terminated`` stops the bootstrap,
  ``done`` the trace), rewards divided by the running std of the discounted return when ``reward_normalization``
  and multiplied by ``reward_scale``; PPO's clipped surrogate with per-minibatch advantage normalisation,
  ``epochs`` passes over shuffled ``minibatch_size`` minibatches; A2C's one step over the whole rollout; the
  value loss is ``critic_coef`` x smooth L1 (as TorchRL's losses with our ``loss_critic_type``);
- SAC: ``init_random_frames`` uniform random frames, then after each rollout ``updates_per_frame`` updates per
  new frame (the fraction carried), batches drawn uniformly from a replay ring buffer of ``capacity``; twin Q
  networks with Polyak-averaged targets, automatic entropy with ``-actions`` as target, rewards scaled by
  ``reward_scale`` when stored.

What they leave out, on purpose: logging, health signals, non-finite guards, checkpoints, evaluation. Settings
they do not implement (an entropy bonus, n-step SAC targets, the residual penalty...) are refused, not ignored.
Every loop returns the marks ``(time, frames, updates)`` after each rollout, as the agents' callback records.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDict
from torch import nn
from torch.nn import functional

from iquitos_lightning.envs.twin import IquitosTwin
from iquitos_lightning.fastpath.foreach_ops import lerp_all_

Mark = tuple[float, int, int]  # (perf_counter, frames so far, updates so far)
ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "silu": nn.SiLU}
SCALE_MIN = 0.01  # TensorDict's biased_softplus default minimum scale
LOG_2 = math.log(2.0)


@dataclass(frozen=True)
class OnPolicySettings:
    """What the plain PPO/A2C loop reads (from the agent's hyperparameters, :func:`on_policy_settings`)."""

    algorithm: str  # "PPO" or "A2C"
    frames_per_batch: int
    hidden_sizes: tuple[int, ...]
    activation: str
    lr: float
    gamma: float
    gae_lambda: float
    critic_coef: float
    max_grad_norm: float
    reward_normalization: bool
    reward_scale: float
    policy_scale: str  # "state" or "parameter"
    initialisation: str  # "orthogonal" or "default"
    clip_epsilon: float = 0.2  # PPO only
    epochs: int = 1  # PPO only
    minibatch_size: int = 0  # PPO only
    normalize_advantage: bool = True  # PPO only


@dataclass(frozen=True)
class SACSettings:
    """What the plain SAC loop reads (from the agent's hyperparameters, :func:`sac_settings`)."""

    frames_per_batch: int
    hidden_sizes: tuple[int, ...]
    activation: str
    batch_size: int
    actor_lr: float
    critic_lr: float
    alpha_lr: float
    alpha_init: float
    gamma: float
    tau: float
    updates_per_frame: float
    init_random_frames: int
    capacity: int
    reward_scale: float


def _refuse(hparams: dict[str, Any], unsupported: dict[str, Any]) -> None:
    """Refuse settings the plain loops do not implement (a plain loop that ignored them would not be the same run)."""
    for key, neutral in unsupported.items():
        if hparams.get(key, neutral) != neutral:
            raise ValueError(f"the plain loop does not implement {key}={hparams[key]!r} (only {neutral!r})")


def on_policy_settings(algorithm: str, hparams: dict[str, Any]) -> OnPolicySettings:
    """The plain PPO/A2C settings of an agent's ``hparams`` (every default already filled in by the agent)."""
    _refuse(hparams, {"entropy_coef": 0.0, "initial_scale": 1.0, "distribution": "tanh_normal"})
    common = {
        "algorithm": algorithm,
        "frames_per_batch": int(hparams["rollout"]["frames_per_batch"]),
        "hidden_sizes": tuple(hparams["hidden_sizes"]),
        "activation": hparams["activation"],
        "lr": float(hparams["lr"]),
        "gamma": float(hparams["gamma"]),
        "gae_lambda": float(hparams["gae_lambda"]),
        "critic_coef": float(hparams["critic_coef"]),
        "max_grad_norm": float(hparams["max_grad_norm"]),
        "reward_normalization": bool(hparams["reward_normalization"]),
        "reward_scale": float(hparams["reward_scale"]),
        "policy_scale": hparams["policy_scale"],
        "initialisation": hparams["initialisation"],
    }
    if algorithm == "PPO":
        return OnPolicySettings(
            **common,
            clip_epsilon=float(hparams["clip_epsilon"]),
            epochs=int(hparams["epochs"]),
            minibatch_size=int(hparams["minibatch_size"]),
            normalize_advantage=bool(hparams["normalize_advantage"]),
        )
    return OnPolicySettings(**common)


def sac_settings(hparams: dict[str, Any]) -> SACSettings:
    """The plain SAC settings of an agent's ``hparams``."""
    _refuse(
        hparams,
        {
            "n_steps": 1,
            "residual_penalty": 0.0,
            "actor_delay_frames": 0,
            "zero_mean_start": False,
            "initial_scale": 1.0,
            "loss_function": "l2",
            "target_entropy": "auto",
        },
    )
    return SACSettings(
        frames_per_batch=int(hparams["rollout"]["frames_per_batch"]),
        hidden_sizes=tuple(hparams["hidden_sizes"]),
        activation=hparams["activation"],
        batch_size=int(hparams["batch_size"]),
        actor_lr=float(hparams["actor_lr"]),
        critic_lr=float(hparams["critic_lr"]),
        alpha_lr=float(hparams["alpha_lr"]),
        alpha_init=float(hparams["alpha_init"]),
        gamma=float(hparams["gamma"]),
        tau=float(hparams["tau"]),
        updates_per_frame=float(hparams["updates_per_frame"]),
        init_random_frames=int(hparams["init_random_frames"]),
        capacity=int(hparams["buffer"]["capacity"]),
        reward_scale=float(hparams["reward_scale"]),
    )


# ----- networks -------------------------------------------------------------------------------------------------
def mlp(inputs: int, hidden: tuple[int, ...], outputs: int, activation: str) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(inputs, width), ACTIVATIONS[activation]()]
        inputs = width
    return nn.Sequential(*layers, nn.Linear(inputs, outputs))


@torch.no_grad()
def orthogonal(network: nn.Sequential, output_gain: float) -> None:
    """CleanRL's ``layer_init``: orthogonal weights (gain sqrt(2), ``output_gain`` for the last layer), zero biases."""
    linears = [layer for layer in network if isinstance(layer, nn.Linear)]
    for layer in linears:
        nn.init.orthogonal_(layer.weight, math.sqrt(2) if layer is not linears[-1] else output_gain)
        nn.init.zeros_(layer.bias)


class TanhGaussianPolicy(nn.Module):
    """A Gaussian over pre-tanh actions, squashed by tanh into the twin's [-1, 1]; the scale is a network output
    (``"state"``, softplus biased so that 0 maps to 1) or one learned log-std per action (``"parameter"``)."""

    def __init__(self, observations: int, actions: int, hidden: tuple[int, ...], activation: str, scale: str) -> None:
        super().__init__()
        self.state_scale = scale == "state"
        self.body = mlp(observations, hidden, 2 * actions if self.state_scale else actions, activation)
        self.log_std = None if self.state_scale else nn.Parameter(torch.zeros(actions))
        self.scale_bias = math.log(math.expm1(1.0 - SCALE_MIN))  # softplus(0 + bias) + min = 1

    def distribution(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.body(observation)
        if self.state_scale:
            loc, raw = out.chunk(2, -1)
            return loc, functional.softplus(raw + self.scale_bias) + SCALE_MIN
        return out, self.log_std.exp().expand_as(out)

    def sample(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(pre-tanh sample, action, log-probability of the action), reparametrised."""
        loc, scale = self.distribution(observation)
        pre_tanh = loc + scale * torch.randn_like(loc)
        return pre_tanh, torch.tanh(pre_tanh), tanh_log_prob(loc, scale, pre_tanh)


def tanh_log_prob(loc: torch.Tensor, scale: torch.Tensor, pre_tanh: torch.Tensor) -> torch.Tensor:
    """log-density of tanh(u) for u ~ Normal(loc, scale), summed over actions."""
    normal = -((pre_tanh - loc) ** 2) / (2 * scale**2) - scale.log() - 0.5 * math.log(2 * math.pi)
    jacobian = 2 * (LOG_2 - pre_tanh - functional.softplus(-2 * pre_tanh))
    return (normal - jacobian).sum(-1)


def _sizes(twin: IquitosTwin) -> tuple[int, int, int]:
    return twin.num_envs, int(twin.observation_spec["observation"].shape[-1]), int(twin.action_spec.shape[-1])


def _step(twin: IquitosTwin, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One twin step: (next observation, reward [B], terminated [B], done [B])."""
    out = twin.step(TensorDict({"action": action}, batch_size=twin.batch_size))["next"]
    return out["observation"], out["reward"][:, 0], out["terminated"][:, 0], out["done"][:, 0]


def _continue(twin: IquitosTwin, next_observation: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
    """The observation to act on next: a fresh episode's first for the envs that are done (partial reset)."""
    if not bool(done.any()):
        return next_observation
    fresh = twin.reset(TensorDict({"_reset": done[:, None]}, batch_size=twin.batch_size))["observation"]
    return torch.where(done[:, None], fresh, next_observation)


# ----- PPO and A2C ----------------------------------------------------------------------------------------------
class ReturnStd:
    """The running std of the discounted return per env (gym's NormalizeReward, rollout at a time as ours)."""

    def __init__(self, envs: int, gamma: float) -> None:
        self.gamma, self.returns = gamma, torch.zeros(envs, dtype=torch.float64)
        self.count, self.mean, self.var = 1e-4, 0.0, 1.0

    def update(self, reward: torch.Tensor, done: torch.Tensor) -> float:
        """Add the rollout's [T, B] returns to the statistics; the std rewards are divided by."""
        seen = []
        for step in range(reward.shape[0]):
            self.returns = self.returns * self.gamma + reward[step].double()
            seen.append(self.returns)
            self.returns = self.returns.masked_fill(done[step], 0.0)
        values = torch.stack(seen)
        batch_mean, batch_var, batch_count = float(values.mean()), float(values.var(unbiased=False)), values.numel()
        delta, total = batch_mean - self.mean, self.count + batch_count
        self.mean += delta * batch_count / total
        m2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total
        self.var = m2 / total
        self.count = total
        return math.sqrt(self.var + 1e-8)


def on_policy_networks(twin: IquitosTwin, settings: OnPolicySettings) -> tuple[TanhGaussianPolicy, nn.Sequential]:
    """The policy and the state-value critic of ``settings`` for ``twin``'s observation and action sizes."""
    _, observations, actions = _sizes(twin)
    hidden, activation = settings.hidden_sizes, settings.activation
    policy = TanhGaussianPolicy(observations, actions, hidden, activation, settings.policy_scale)
    critic = mlp(observations, hidden, 1, activation)
    if settings.initialisation == "orthogonal":
        orthogonal(policy.body, 0.01)
        orthogonal(critic, 1.0)
    return policy, critic


def train_on_policy(
    twin: IquitosTwin,
    settings: OnPolicySettings,
    rollouts: int,
    networks: tuple[TanhGaussianPolicy, nn.Sequential] | None = None,
) -> list[Mark]:
    """``rollouts`` rollouts of PPO (or A2C) on ``twin``, each followed by its updates; a mark after each.
    ``networks``: the policy and critic to train (default: fresh :func:`on_policy_networks`)."""
    envs, observations, actions = _sizes(twin)
    steps = settings.frames_per_batch // envs
    policy, critic = networks or on_policy_networks(twin, settings)
    parameters = [*policy.parameters(), *critic.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=settings.lr, foreach=True)
    return_std = ReturnStd(envs, settings.gamma) if settings.reward_normalization else None
    obs_buffer = torch.zeros(steps, envs, observations)
    next_obs_buffer = torch.zeros(steps, envs, observations)
    pre_tanh_buffer = torch.zeros(steps, envs, actions)
    log_prob_buffer = torch.zeros(steps, envs)
    reward_buffer = torch.zeros(steps, envs)
    terminated_buffer = torch.zeros(steps, envs, dtype=torch.bool)
    done_buffer = torch.zeros(steps, envs, dtype=torch.bool)
    observation = twin.reset()["observation"]
    frames = updates = 0
    marks: list[Mark] = []
    for _ in range(rollouts):
        with torch.no_grad():
            for step in range(steps):
                pre_tanh, action, log_prob = policy.sample(observation)
                next_observation, reward, terminated, done = _step(twin, action)
                obs_buffer[step], next_obs_buffer[step], pre_tanh_buffer[step] = observation, next_observation, pre_tanh
                log_prob_buffer[step], reward_buffer[step] = log_prob, reward
                terminated_buffer[step], done_buffer[step] = terminated, done
                observation = _continue(twin, next_observation, done)
            frames += steps * envs
            rewards = reward_buffer
            if return_std is not None:
                rewards = rewards / return_std.update(rewards, done_buffer)
            rewards = rewards * settings.reward_scale
            values = critic(obs_buffer).squeeze(-1)
            next_values = critic(next_obs_buffer).squeeze(-1)
            advantages = gae(rewards, values, next_values, terminated_buffer, done_buffer, settings)
            returns = advantages + values
        batch = (obs_buffer, pre_tanh_buffer, log_prob_buffer, advantages, returns)
        obs, pre, old_log_prob, adv, ret = (tensor.reshape(steps * envs, *tensor.shape[2:]) for tensor in batch)
        if settings.algorithm == "PPO":
            for _ in range(settings.epochs):
                for index in torch.randperm(steps * envs).split(settings.minibatch_size):
                    loss = _ppo_loss(policy, critic, settings, obs[index], pre[index], old_log_prob[index], adv[index])
                    loss = loss + _value_loss(critic, settings, obs[index], ret[index])
                    _optimize(optimizer, parameters, loss, settings.max_grad_norm)
                    updates += 1
        else:
            loc, scale = policy.distribution(obs)
            loss = -(tanh_log_prob(loc, scale, pre) * adv).mean() + _value_loss(critic, settings, obs, ret)
            _optimize(optimizer, parameters, loss, settings.max_grad_norm)
            updates += 1
        marks.append((time.perf_counter(), frames, updates))
    return marks


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    done: torch.Tensor,
    settings: OnPolicySettings,
) -> torch.Tensor:
    """GAE over [T, B]: ``terminated`` stops the bootstrap, ``done`` (terminated or truncated) the trace."""
    deltas = rewards + settings.gamma * next_values * (~terminated) - values
    decay = settings.gamma * settings.gae_lambda * (~done)
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for step in reversed(range(rewards.shape[0])):
        running = deltas[step] + decay[step] * running
        advantages[step] = running
    return advantages


def _ppo_loss(
    policy: TanhGaussianPolicy,
    critic: nn.Module,
    settings: OnPolicySettings,
    observation: torch.Tensor,
    pre_tanh: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantage: torch.Tensor,
) -> torch.Tensor:
    if settings.normalize_advantage and advantage.numel() > 1:
        advantage = (advantage - advantage.mean()) / advantage.std().clamp_min(1e-6)
    loc, scale = policy.distribution(observation)
    ratio = (tanh_log_prob(loc, scale, pre_tanh) - old_log_prob).exp()
    clipped = ratio.clamp(1 - settings.clip_epsilon, 1 + settings.clip_epsilon)
    return -torch.min(ratio * advantage, clipped * advantage).mean()


def _value_loss(critic: nn.Module, settings: OnPolicySettings, observation: torch.Tensor, target: torch.Tensor):
    return settings.critic_coef * functional.smooth_l1_loss(critic(observation).squeeze(-1), target)


def _optimize(
    optimizer: torch.optim.Optimizer, parameters: list[nn.Parameter], loss: torch.Tensor, max_norm: float = 0.0
) -> None:
    optimizer.zero_grad()
    loss.backward()
    if max_norm > 0:
        nn.utils.clip_grad_norm_(parameters, max_norm)
    optimizer.step()


# ----- SAC ------------------------------------------------------------------------------------------------------
def train_sac(twin: IquitosTwin, settings: SACSettings, rollouts: int) -> list[Mark]:
    """``rollouts`` rollouts of SAC on ``twin`` (the first ``init_random_frames`` frames random), a mark after each."""
    envs, observations, actions = _sizes(twin)
    steps = settings.frames_per_batch // envs
    hidden, activation = settings.hidden_sizes, settings.activation
    policy = TanhGaussianPolicy(observations, actions, hidden, activation, "state")
    q_networks = nn.ModuleList([mlp(observations + actions, hidden, 1, activation) for _ in range(2)])
    q_targets = copy.deepcopy(q_networks).requires_grad_(False)
    log_alpha = torch.tensor(math.log(settings.alpha_init), requires_grad=True)
    target_entropy = -float(actions)
    actor_optimizer = torch.optim.Adam(policy.parameters(), lr=settings.actor_lr, foreach=True)
    q_optimizer = torch.optim.Adam(q_networks.parameters(), lr=settings.critic_lr, foreach=True)
    alpha_optimizer = torch.optim.Adam([log_alpha], lr=settings.alpha_lr, foreach=True)
    buffer = _Replay(settings.capacity, observations, actions)
    observation = twin.reset()["observation"]
    frames = updates = 0
    credit = 0.0
    marks: list[Mark] = []

    def q_min(networks: nn.ModuleList, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        pair = torch.cat([obs, action], -1)
        return torch.min(networks[0](pair), networks[1](pair)).squeeze(-1)

    def update() -> None:
        obs, action, reward, next_obs, terminated = buffer.sample(settings.batch_size)
        alpha = log_alpha.exp().detach()
        with torch.no_grad():
            _, next_action, next_log_prob = policy.sample(next_obs)
            next_q = q_min(q_targets, next_obs, next_action) - alpha * next_log_prob
            target = reward + settings.gamma * (~terminated) * next_q
        pair = torch.cat([obs, action], -1)
        q_loss = sum(functional.mse_loss(network(pair).squeeze(-1), target) for network in q_networks)
        _optimize(q_optimizer, [], q_loss)
        _, new_action, log_prob = policy.sample(obs)
        q_networks.requires_grad_(False)  # the actor's loss reads the Q networks; only the actor learns from it
        actor_loss = (alpha * log_prob - q_min(q_networks, obs, new_action)).mean()
        _optimize(actor_optimizer, [], actor_loss)
        q_networks.requires_grad_(True)
        alpha_loss = -(log_alpha * (log_prob.detach() + target_entropy)).mean()
        _optimize(alpha_optimizer, [], alpha_loss)
        with torch.no_grad():
            lerp_all_(list(q_targets.parameters()), list(q_networks.parameters()), settings.tau)

    for _ in range(rollouts):
        for _ in range(steps):
            with torch.no_grad():
                if frames < settings.init_random_frames:
                    action = torch.rand(envs, actions) * 2 - 1
                else:
                    action = policy.sample(observation)[1]
            next_observation, reward, terminated, done = _step(twin, action)
            buffer.add(observation, action, reward * settings.reward_scale, next_observation, terminated)
            observation = _continue(twin, next_observation, done)
            frames += envs
        if frames >= settings.init_random_frames:
            credit += steps * envs * settings.updates_per_frame
            for _ in range(int(credit)):
                update()
                updates += 1
            credit -= int(credit)
        marks.append((time.perf_counter(), frames, updates))
    return marks


class _Replay:
    """A ring buffer of transitions in preallocated tensors, sampled uniformly with replacement."""

    def __init__(self, capacity: int, observations: int, actions: int) -> None:
        self.capacity, self.size, self.cursor = capacity, 0, 0
        self.obs = torch.empty(capacity, observations)
        self.next_obs = torch.empty(capacity, observations)
        self.action = torch.empty(capacity, actions)
        self.reward = torch.empty(capacity)
        self.terminated = torch.empty(capacity, dtype=torch.bool)

    def add(self, *columns: torch.Tensor) -> None:
        rows = (torch.arange(columns[0].shape[0]) + self.cursor) % self.capacity
        stores = (self.obs, self.action, self.reward, self.next_obs, self.terminated)
        for store, values in zip(stores, columns, strict=True):
            store[rows] = values
        self.cursor = (self.cursor + len(rows)) % self.capacity
        self.size = min(self.size + len(rows), self.capacity)

    def sample(self, batch: int) -> tuple[torch.Tensor, ...]:
        index = torch.randint(self.size, (batch,))
        return self.obs[index], self.action[index], self.reward[index], self.next_obs[index], self.terminated[index]


PLAIN_LOOPS: dict[str, Callable[..., list[Mark]]] = {"PPO": train_on_policy, "A2C": train_on_policy, "SAC": train_sac}
