"""Soft Actor-Critic (Haarnoja et al. 2018) on TorchRL's ``SACLoss``: twin Q, automatic entropy, soft targets.

Read top to bottom like CleanRL's ``sac_continuous_action.py``: the hyperparameters are the
``__init__`` arguments (documented below), :meth:`SAC.update` is one gradient step of all three
losses. What happens to each rollout (store it, then ``updates_per_frame`` updates per new frame once
``init_random_frames`` random frames are in the buffer) is the off-policy layer's (:mod:`.off_policy`);
the collector, frame budget, evaluation and checkpoints are the base's (:mod:`.base`).

Optimization is manual (one Adam with a parameter group per network: actor, critic, alpha): one
``manual_backward`` over the summed losses, then one step of every group. ``manual_backward`` and the Lightning
optimizer go through the precision plugin, so ``16-mixed`` on CUDA gets its gradient scaling and unscaling.
Stepping the Q networks before the actor's backward would fail: the actor loss reads the Q networks (TorchRL's
SACLoss computes all three losses from one forward pass).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase
from torch.optim import Adam

from iquitos_lightning.agents.config import RolloutConfig, check_fraction, check_learning_rates
from iquitos_lightning.agents.health import action_bounds, gradient_norm, policy_spread, q_statistics
from iquitos_lightning.agents.networks import initialise_lazy, make_actor, make_q_value, zero_policy_mean
from iquitos_lightning.agents.off_policy import NonModule, OffPolicyAgent
from iquitos_lightning.agents.policy_average import averaged_policy
from iquitos_lightning.agents.replay import ReplayBufferConfig
from iquitos_lightning.agents.resume import merged_optimizer_state
from iquitos_lightning.agents.speed import SpeedConfig, make_adam
from iquitos_lightning.envs.env_config import EnvConfig
from iquitos_lightning.errors import ConfigError
from iquitos_lightning.fastpath.lean_sac_loss import LeanSACLoss
from iquitos_lightning.fastpath.soft_update import ForeachSoftUpdate


def per_env_target_entropy(target_entropy: float | str, action_shape: torch.Size) -> float:
    """SAC's target entropy, with ``"auto"`` resolved per env: minus the number of actions of ONE env.

    Why not TorchRL's ``"auto"``: it takes minus the product of the whole action spec's shape, and a batched
    env's spec (the twin's ``num_envs`` x actions) then asks for ``num_envs`` times too little entropy (-32 for
    16 envs of 2 actions, -2,064 for 16 envs of 129): the entropy coefficient falls towards 0 and the policy
    collapses onto the ends of the action range (measured: alpha 1e-7 after 50k frames of the 16-env twin).
    """
    if target_entropy == "auto":
        return -float(action_shape[-1]) if len(action_shape) else -1.0
    try:
        return float(target_entropy)
    except ValueError:
        raise ConfigError(f"model.target_entropy must be 'auto' or a number, got {target_entropy!r}") from None


class SAC(OffPolicyAgent):
    """SAC with a host-side replay buffer.

    Args:
        env: which environment (site or Gymnasium id) and its seeds.
        rollout: frame budget, frames per collector batch, evaluation period and episodes.
        buffer: replay buffer capacity and storage (host RAM or a memmap file; never the GPU).
        hidden_sizes: hidden layers of the actor and of each Q network.
        activation: hidden activation ("relu", "tanh", "elu", "silu").
        batch_size: transitions per gradient update (sampled on the host, then moved to the device).
        actor_lr, critic_lr, alpha_lr: Adam learning rates of the policy, the twin Q networks and the
            entropy coefficient.
        gamma: discount factor.
        tau: soft target update rate (target <- tau * online + (1 - tau) * target, after each update).
        alpha_init: initial entropy coefficient.
        target_entropy: "auto" (minus the action dimension) or a number.
        updates_per_frame: gradient updates per collected frame (the update-to-data ratio).
        init_random_frames: frames of uniformly random actions before learning starts.
        loss_function: Q regression loss ("l2", "smooth_l1", "l1").
        zero_mean_start: start the policy's mean at action 0 for every observation (its output layer zeroed):
            with ``env.residual: rule`` the untrained policy then *is* the rule-based controller.
        initial_scale: the policy's Gaussian scale at the start (before the tanh); 1 covers the action range,
            about 0.1 explores near the mean (with ``zero_mean_start``: near the rule).
        actor_delay_frames: frames during which only the Q networks learn (the policy and the entropy
            coefficient wait): a policy that starts at a good controller is not moved by an untrained critic.
        residual_penalty: weight of the policy mean's mean square (before the tanh) in the actor loss: with
            ``residual: rule`` it holds the policy near the rule unless the critic's gradient keeps pointing
            away (a behaviour-regularised actor, as TD3+BC regularises towards the data's actions).
        n_steps: the critic's target sums this many rewards before it bootstraps (TorchRL's ``MultiStep``,
            :mod:`.multi_step`): on ``tariff`` the cost of spending the battery early shows hours later, when it
            runs empty in the evening window; 1 is SAC's one-step target.
        reward_scale: rewards are multiplied by this when stored in the replay buffer (SAC's reward scale: with
            automatic entropy tuning it mostly sets the Q values' range; evaluation returns stay unscaled).
        policy_average: evaluations, the choice of the best checkpoint and tests act with a moving average of the
            actor's weights (:mod:`.policy_average`), moved this far towards the actor after each update that
            stepped it (the plain mean of the first ``1 / policy_average`` updates); 0: the actor itself. The actor
            that collects and learns is the same either way.
        speed: fast-path switches of the update step (compile, CUDA graphs, TF32; all off by default).
    """

    algorithm = "sac"  # the memory model and profile keys it uses (iquitos_lightning.profile.profiles)
    off_policy = True  # may collect one rollout ahead (rollout.overlap)

    def __init__(
        self,
        env: EnvConfig | None = None,
        rollout: RolloutConfig | None = None,
        buffer: ReplayBufferConfig | None = None,
        hidden_sizes: tuple[int, ...] = (256, 256),
        activation: str = "relu",
        batch_size: int = 256,
        actor_lr: float = 3e-4,
        critic_lr: float = 1e-3,
        alpha_lr: float = 1e-3,
        gamma: float = 0.99,
        tau: float = 0.005,
        alpha_init: float = 1.0,
        target_entropy: float | str = "auto",
        updates_per_frame: float = 1.0,
        init_random_frames: int = 1_000,
        loss_function: str = "l2",
        zero_mean_start: bool = False,
        initial_scale: float = 1.0,
        actor_delay_frames: int = 0,
        residual_penalty: float = 0.0,
        n_steps: int = 1,
        reward_scale: float = 1.0,
        policy_average: float = 0.0,
        speed: SpeedConfig | None = None,
    ) -> None:
        # before the envs are built: a bad value costs no site start
        check_learning_rates(actor_lr=actor_lr, critic_lr=critic_lr, alpha_lr=alpha_lr)
        if not (math.isfinite(alpha_init) and alpha_init > 0):
            raise ConfigError(f"model.alpha_init must be an entropy weight > 0 (SAC learns its log): {alpha_init!r}")
        check_fraction("tau", tau, zero_allowed=False)
        check_fraction("policy_average", policy_average, zero_allowed=True)
        super().__init__(
            env,
            rollout,
            buffer,
            batch_size,
            updates_per_frame,
            init_random_frames,
            speed,
            gamma=gamma,
            n_steps=n_steps,
            reward_scale=reward_scale,
        )
        self.learning_rates = (actor_lr, critic_lr, alpha_lr)

        self.actor_delay_frames = actor_delay_frames
        # Set by update() before the losses: torch.compile guards on what loss_terms reads, and reading the frame
        # counter there made it recompile at every rollout until its limit (8), then run eager (issue 32's run).
        self.critic_only = actor_delay_frames > 0
        self.residual_penalty = residual_penalty
        self.actor = make_actor(
            self.train_env, hidden_sizes, activation, return_log_prob=self.actor_log_prob, initial_scale=initial_scale
        )
        q_value = make_q_value(self.train_env, hidden_sizes, activation)
        initialise_lazy(self.train_env, self.actor, q_value)
        if zero_mean_start:
            zero_policy_mean(self.actor)
        self.averaged_actor = averaged_policy(self.actor, policy_average) if policy_average else None
        self.loss_module = LeanSACLoss(
            actor_network=self.actor,
            qvalue_network=q_value,
            num_qvalue_nets=2,
            loss_function=loss_function,
            alpha_init=alpha_init,
            action_spec=self.train_env.action_spec,
            target_entropy=per_env_target_entropy(target_entropy, self.train_env.action_spec.shape),
        )
        self.loss_module.make_value_estimator(gamma=gamma)
        # SACLoss creates `_target_entropy` lazily on first read; read it now so a fresh module and a
        # checkpoint have the same keys (otherwise resuming fails with an unexpected key).
        _ = self.loss_module.target_entropy
        self._target_updater = NonModule(ForeachSoftUpdate(self.loss_module, tau=tau))  # SoftUpdate, one op
        self.create_replay_buffer()

    @property
    def exploration_policy(self):
        return self.actor

    def stored_keys(self) -> list[NestedKey]:
        """What SAC's updates and health signals read of a transition: TorchRL's ``SACLoss.in_keys`` (the action,
        the next reward and end flags, the actor's inputs now and next, the Q networks' inputs), the Q networks'
        other inputs at the next state (the critic's hindsight, envs/hindsight.py: the target reads them, though
        ``in_keys`` leaves them out) and the n-step discount's step count (multi_step.py). A key missing here would
        fail the first update, loudly."""
        loss = self.loss_module
        action = loss.tensor_keys.action
        next_q_inputs = [("next", key) for key in loss.qvalue_network.in_keys if key != action]
        steps = loss.value_estimator.tensor_keys.steps_to_next_obs
        return list(dict.fromkeys([*loss.in_keys, *next_q_inputs, steps]))

    def configure_optimizers(self) -> Adam:
        """One Adam with a parameter group per network, each at its learning rate: the arithmetic of three Adams
        (Adam steps each group on its own), with one optimizer step through Lightning per update instead of three
        (~3 % of a SAC update on the CPU; under fp16 mixed precision one GradScaler step and update per update, not
        three). The order of the groups is the checkpoints': actor, critic, alpha."""
        loss = self.loss_module
        actor_lr, critic_lr, alpha_lr = self.learning_rates
        groups = [
            {"params": list(loss.actor_network_params.flatten_keys().values()), "lr": actor_lr},
            {"params": list(loss.qvalue_network_params.flatten_keys().values()), "lr": critic_lr},
            {"params": [loss.log_alpha], "lr": alpha_lr},
        ]
        return make_adam(groups, actor_lr, self.speed_config, self.device)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """A checkpoint of a run saved before SAC had one optimizer holds three optimizer states (actor, critic,
        alpha): merged into the one optimizer's, so that such a run resumes with its Adam moments (Lightning loads
        the optimizer states after this hook). A checkpoint that does not fit this agent is refused first."""
        super().on_load_checkpoint(checkpoint)
        states = checkpoint.get("optimizer_states")
        if isinstance(states, list) and len(states) == 3:
            checkpoint["optimizer_states"] = [merged_optimizer_state(states)]

    def loss_terms(self, batch: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Q regression to the soft Bellman target, policy and entropy-coefficient losses, summed (the Q loss
        alone during ``actor_delay_frames``: the policy and alpha get no gradient, so Adam skips their groups)."""
        losses = self.loss_module(batch)
        if self.critic_only:
            total = losses["loss_qvalue"]
        else:
            total = losses["loss_actor"] + losses["loss_qvalue"] + losses["loss_alpha"]
            if self.residual_penalty:
                loc = self.actor.module[0](batch.select("observation"))["loc"]
                total = total + self.residual_penalty * loc.square().mean()
        return total, {
            key: losses[key].detach() for key in ("loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy")
        }

    def update(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        """One SAC update: the three losses, one backward, one step of each network's group (actor, critic, alpha),
        soft targets.

        A non-finite loss or gradient skips the whole update, target networks included.
        """
        self.critic_only = self.frames_done < self.actor_delay_frames
        total, metrics = self.compute_losses(batch)
        if self.apply_gradients(total, metrics, ("loss_actor", "loss_qvalue", "loss_alpha")).applied:
            self._target_updater.value.step()
        return metrics

    def run_update(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        """One update, then the policy average follows the actor if the actor stepped. Here, not in :meth:`update`:
        that may run as a captured CUDA graph, and the average's count is read on the host."""
        metrics = super().run_update(batch)
        if self.averaged_actor is not None and self.last_update_applied and not self.critic_only:
            self.averaged_actor.update_parameters(self.actor)
        return metrics

    @torch.no_grad()
    def batch_health(self, batch: TensorDictBase) -> dict[str, float]:
        """The policy's spread and its mode's share at the bounds, the twin and target Q statistics, the entropy
        coefficient, and the gradient norms of the last update (still on the parameters: optimizers zero them
        at the start of the next update, not after a step)."""
        loss = self.loss_module
        parameters = self.actor.module[0](batch.select("observation").clone())
        low, high = (bound.to(parameters["loc"]) for bound in action_bounds(self.actor))  # the spec's are on the CPU
        mode = low + (torch.tanh(parameters["loc"]) + 1) * (high - low) / 2
        return (
            policy_spread(parameters["loc"], parameters["scale"], mode, low, high)
            | q_statistics(loss, batch)
            | {
                "alpha": float(loss.log_alpha.exp()),
                "actor_gradient_norm": float(gradient_norm(loss.actor_network_params.flatten_keys().values())),
                "critic_gradient_norm": float(gradient_norm(loss.qvalue_network_params.flatten_keys().values())),
            }
        )
