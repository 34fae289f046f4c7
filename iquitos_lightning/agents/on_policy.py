"""The on-policy layer under PPO and A2C: actor and state-value critic, GAE advantages, minibatch epochs, clipping.

Why a layer: PPO and A2C learn from exactly the rollout their current policy collected, with the same
networks (a squashed-Gaussian actor and an MLP state value, orthogonally initialised), the same advantage
estimate (TorchRL's ``GAE``) on rewards divided by the running std of the discounted return
(:mod:`.reward_normalizer`) and scaled by ``reward_scale``, one Adam over the loss module and a global gradient-norm
clip; only the loss differs (clipped surrogate and several epochs of minibatches, or one plain
policy-gradient step). Optimization is manual because one rollout may give many optimizer steps; gradients
are clipped with the norm the non-finite check computes (:func:`~iquitos_lightning.agents.guards.backward_and_step`),
or under fp16 mixed precision in :meth:`on_before_optimizer_step`, once Lightning's precision plugin has unscaled them.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torch.optim import Adam
from torchrl.objectives.value import GAE

from iquitos_lightning.agents.base import RLAgent
from iquitos_lightning.agents.config import RolloutConfig, check_fraction, check_learning_rates, check_reward_scale
from iquitos_lightning.agents.health import (
    HEALTH_PREFIX,
    approximate_kl,
    critic_fit,
    gradient_norm,
    rollout_policy_spread,
)
from iquitos_lightning.agents.networks import (
    POLICY_OUTPUT_GAIN,
    VALUE_OUTPUT_GAIN,
    initialise_lazy,
    make_actor,
    make_state_value,
    orthogonal_init,
)
from iquitos_lightning.agents.policy_average import averaged_policy
from iquitos_lightning.agents.reward_normalizer import RewardNormalizer
from iquitos_lightning.agents.speed import SpeedConfig, make_adam
from iquitos_lightning.envs.env_config import EnvConfig
from iquitos_lightning.errors import ConfigError

INITIALISATIONS = ("orthogonal", "default")


def critic_and_entropy(entropy_coef: float, critic_coef: float) -> dict[str, Any]:
    """The loss options PPO and A2C share: the value loss's weight and kind, and the entropy bonus (0: none)."""
    return {
        "entropy_bonus": entropy_coef > 0,
        "entropy_coeff": entropy_coef if entropy_coef > 0 else None,
        "critic_coeff": critic_coef,
        "loss_critic_type": "smooth_l1",
    }


def state_values(critic: TensorDictModule, data: TensorDictBase) -> None:
    """Write the critic's value of each observation and of each next observation into ``data`` (the keys GAE reads
    when it has no value network), with one call of the critic's network on both stacked.

    Why not GAE's own value network: TorchRL's ``GAE`` runs the critic through ``vmap`` over a stacked tensordict,
    which costs more than the matrix products themselves on a rollout of this project's sizes (A2C's 512 frames:
    1.54 ms against 0.78 ms; PPO's 8,192: 20.5 against 10.6 ms, one thread). The values are the same bits
    (tests/agents/test_state_values.py compares the advantages and targets with the library's path). The rollouts
    hold finite next observations (the envs check them), so the library's NaN substitution has nothing to do.
    """
    inputs = [torch.stack([data.get(key), data.get(("next", key))]) for key in critic.in_keys]
    values = critic.module(*inputs)
    key = critic.out_keys[0]
    data.set(key, values[0])
    data.set(("next", key), values[1])


def gather_rows(data: TensorDictBase, rows: torch.Tensor, *, out: TensorDictBase) -> None:
    """``out`` = ``data[rows]``, written into ``out``'s tensors (the same values, bit for bit).

    Why not ``data[rows]`` per minibatch: each indexing allocates a fresh tensor per entry, and in a training run
    (not in a warm microbenchmark) those gathers cost PPO at the tariff profile's settings 41-58 ms a rollout against
    8.5-9 ms for one gather per epoch into tensors kept from the rollout before, whose minibatches are then views
    (interleaved in one run, median of 10 rollouts each; ~8 % of the rollout). The minibatches hold the same rows in
    the same order as before, so runs repeat bit for bit (tests/agents/test_ppo_minibatch_keys.py).
    """
    for source, target in zip(data.values(True, True), out.values(True, True), strict=True):
        torch.index_select(source, 0, rows, out=target)


def same_layout(a: TensorDictBase, b: TensorDictBase) -> bool:
    """Whether two tensordicts have the same batch size and leaves (keys in order, shapes, dtypes, devices)."""
    if a.batch_size != b.batch_size:
        return False
    leaves_a, leaves_b = list(a.items(True, True)), list(b.items(True, True))
    return len(leaves_a) == len(leaves_b) and all(
        key_a == key_b and x.shape == y.shape and x.dtype == y.dtype and x.device == y.device
        for (key_a, x), (key_b, y) in zip(leaves_a, leaves_b, strict=True)
    )


class OnPolicyAgent(RLAgent):
    """Actor, critic and GAE built from the env's specs; subclasses set ``loss_module`` and :meth:`learn`.

    A subclass declares only its own hyperparameters (and its defaults of ``lr`` and ``gae_lambda``, which
    this layer leaves to each algorithm) and passes the rest on as ``**kwargs``: jsonargparse resolves
    ``super().__init__(**kwargs)`` into these parameters, so the CLI, ``--print_config`` and the YAML keys
    still show every one, and Lightning's ``save_hyperparameters`` records them all.

    Args (shared by PPO and A2C):
        env: which environment (site or Gymnasium id) and its seeds.
        rollout: frame budget, frames per rollout, evaluation period and episodes.
        hidden_sizes: hidden layers of the actor and of the value network.
        activation: hidden activation ("tanh", "relu", "elu", "silu").
        lr: Adam learning rate (actor and critic together).
        lr_anneal: lower the learning rate linearly to 0 over the frame budget, set before each rollout's updates
            from the frames done (CleanRL's ``anneal_lr``; follows a resume): a policy that found a controller
            keeps it instead of stepping past it at full rate (measured on A2C, docs/experiments.md).
        gamma: discount factor.
        gae_lambda: GAE's lambda (bias/variance of the advantage; 1.0: n-step returns).
        entropy_coef: weight of the entropy bonus (0 disables it).
        critic_coef: weight of the value loss.
        max_grad_norm: global gradient-norm clip (0 disables it).
        reward_normalization: divide rewards by the running std of the discounted return before GAE
            (:mod:`.reward_normalizer`; CleanRL's and SB3's reward normalisation; in the checkpoint).
        reward_scale: rewards are multiplied by this before learning, after the normalisation (evaluation returns
            stay unscaled).
        policy_scale: "parameter" (one learned log-std per action, CleanRL's), "fixed" (that log-std kept at
            ``initial_scale``, never trained), "state" (an output of the actor network, as SAC's), "gsde" or
            "gsde_fixed" (state-dependent exploration noise, learned or kept: networks.StateDependentNoiseHead).
        initial_scale: the Gaussian's scale (before any tanh) at the start; 1 spreads a fresh policy over the action
            range; Stable-Baselines3's zoo starts A2C at exp(-2) = 0.135, where the policy gradient of the mean is
            (1/0.135)^2 = 55 times that at 1 for the same advantage.
        distribution: "tanh_normal" (the Gaussian squashed onto the action bounds, as SAC's) or "normal" (a plain
            Gaussian whose samples the env clips, CleanRL's and SB3's; why A2C wants it: networks.make_actor).
        initialisation: "orthogonal" (CleanRL's ``layer_init``: gain sqrt(2) hidden, 0.01 policy output, 1 value
            output) or "default" (torch's own; measured on the tariff twin with ``reward_scale`` 0.05 and no
            normalisation, it closed 33.5 % of the gap at 524k frames; orthogonal + normalisation 18.4 %).
        policy_average: evaluations, the choice of the best checkpoint and tests act with a moving average of the
            actor's weights (:mod:`.policy_average`, as SAC's), moved this far towards the actor after each
            rollout's updates (the plain mean of the first ``1 / policy_average`` rollouts); 0: the actor itself.
            Why per rollout: a rollout's epochs are one step of the policy iteration, and the evaluated policy of
            one seed moves 1-2 points of the gap between neighbouring evaluations (docs/experiments.md). The actor
            that collects and learns is the same either way.
        speed: fast-path switches of the update step (compile, CUDA graphs, TF32; all off by default).
    """

    loss_module: torch.nn.Module

    def __init__(
        self,
        *,
        env: EnvConfig | None = None,
        rollout: RolloutConfig | None = None,
        hidden_sizes: tuple[int, ...] = (64, 64),
        activation: str = "tanh",
        lr: float,
        gamma: float = 0.99,
        gae_lambda: float,
        entropy_coef: float = 0.0,
        critic_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        reward_normalization: bool = True,
        reward_scale: float = 1.0,
        policy_scale: str = "parameter",
        initial_scale: float = 1.0,
        distribution: str = "tanh_normal",
        initialisation: str = "orthogonal",
        lr_anneal: bool = False,
        policy_average: float = 0.0,
        speed: SpeedConfig | None = None,
    ) -> None:
        check_learning_rates(lr=lr)  # before the envs are built: a bad value costs no site start
        check_reward_scale(reward_scale)
        check_fraction("gamma", gamma, zero_allowed=False)
        check_fraction("gae_lambda", gae_lambda, zero_allowed=True)
        check_fraction("policy_average", policy_average, zero_allowed=True)
        super().__init__(env, rollout, speed)
        self.automatic_optimization = False
        self.lr = lr
        self.lr_anneal = lr_anneal
        if lr_anneal and self.speed_config.cuda_graphs:
            raise ConfigError(
                "model.lr_anneal changes the learning rate each rollout, which a CUDA graph would keep at its "
                "captured value: turn one of model.lr_anneal and model.speed.cuda_graphs off"
            )
        self.max_grad_norm = max_grad_norm
        self.reward_scale = reward_scale
        self.loss_options = critic_and_entropy(entropy_coef, critic_coef)  # for the subclass's loss module
        self.reward_normalizer = RewardNormalizer(gamma) if reward_normalization else None
        self.actor = make_actor(
            self.train_env,
            hidden_sizes,
            activation,
            initial_scale=initial_scale,
            policy_scale=policy_scale,
            distribution=distribution,
        )
        self.critic = make_state_value(self.train_env, hidden_sizes, activation)
        initialise_lazy(self.train_env, self.actor, self.critic)
        if initialisation not in INITIALISATIONS:
            raise ConfigError(f"model.initialisation must be one of {INITIALISATIONS}, got {initialisation!r}")
        if initialisation == "orthogonal":
            orthogonal_init(self.actor, POLICY_OUTPUT_GAIN)
            orthogonal_init(self.critic, VALUE_OUTPUT_GAIN)
        self.averaged_actor = averaged_policy(self.actor, policy_average) if policy_average else None
        # GAE without a value network: it reads the state values :meth:`with_advantages` writes (state_values)
        self.advantage_module = GAE(gamma=gamma, lmbda=gae_lambda, value_network=None, average_gae=False)
        self._shuffled_rows: TensorDictBase | None = None  # learn_in_minibatches' buffer (not state: rebuilt)

    @property
    def exploration_policy(self):
        return self.actor

    def configure_optimizers(self) -> Adam:
        return make_adam(self.loss_module.parameters(), self.lr, self.speed_config, self.device)

    def learn(self, rollout: TensorDictBase) -> dict[str, torch.Tensor | float]:
        """Advantages by GAE, the algorithm's updates (:meth:`learn_from`), and the rollout's health signals
        (:mod:`.health`, recorded in :attr:`~.base.RLAgent.health`): PPO's clip fraction, the critic's fit and the
        policy's spread read before the updates, the KL the updates moved the policy by and their gradient norm
        after."""
        data = self.with_advantages(rollout)
        health = critic_fit(data) | rollout_policy_spread(self.actor, data)
        self.health.take_gradient_norm()  # only this rollout's steps count
        if self.lr_anneal:
            health["learning_rate"] = self.anneal_learning_rate(self.frames_done - rollout.numel())
        metrics: dict[str, torch.Tensor | float] = dict(self.learn_from(data))
        from_updates = {key: metrics.pop(key) for key in [key for key in metrics if key.startswith(HEALTH_PREFIX)]}
        self.health.record({key.removeprefix(HEALTH_PREFIX): value for key, value in from_updates.items()})
        health["approx_kl"] = approximate_kl(self.actor, data)
        gradient_norm = self.health.take_gradient_norm()
        if gradient_norm is not None:
            health["gradient_norm"] = gradient_norm
        self.health.record(health)
        if self.averaged_actor is not None:
            self.averaged_actor.update_parameters(self.actor)
        return metrics | self.reward_metrics()

    def anneal_learning_rate(self, frames_before: int) -> float:
        """Set the optimizer's learning rate to ``lr`` x the share of the budget left when this rollout began."""
        learning_rate = self.lr * max(1.0 - frames_before / self.frame_budget, 0.0)
        for optimizer in self.trainer.optimizers:
            for group in optimizer.param_groups:
                group["lr"] = learning_rate
        return learning_rate

    def learn_from(self, data: TensorDictBase) -> dict[str, torch.Tensor]:
        """The algorithm's updates on one rollout with advantages (PPO: minibatch epochs; A2C: one step)."""
        raise NotImplementedError

    def with_advantages(self, rollout: TensorDictBase) -> TensorDictBase:
        """The rollout on the training device with normalised and scaled rewards and GAE's advantages and value
        targets (the normaliser's statistics take in this rollout first)."""
        data = rollout.exclude("collector").to(self.device)
        if self.reward_normalizer is not None:
            self.reward_normalizer.normalize_rollout(data)
        data["next", "reward"] = data["next", "reward"] * self.reward_scale
        with torch.no_grad():
            state_values(self.critic, data)
            self.advantage_module(data)
        return data

    def reward_metrics(self) -> dict[str, float]:
        """What rewards are currently divided by (``reward_norm_std``; absent without normalisation)."""
        return {} if self.reward_normalizer is None else {"reward_norm_std": self.reward_normalizer.std}

    def agent_state(self) -> dict[str, Any]:
        return {} if self.reward_normalizer is None else {"reward_normalizer": self.reward_normalizer.state_dict()}

    def load_agent_state(self, state: dict[str, Any]) -> None:
        """The normaliser's statistics (a checkpoint of an earlier version, or of a run without, has none: kept), and
        its returns in progress when the run goes on with the saved episodes (the twin)."""
        if self.reward_normalizer is not None and "reward_normalizer" in state:
            episodes_go_on = self.continues_saved_episodes
            self.reward_normalizer.load_state_dict(state["reward_normalizer"], episodes_go_on=episodes_go_on)

    def forget_episodes_in_progress(self) -> None:
        if self.reward_normalizer is not None:
            self.reward_normalizer.reset_returns()

    def learn_in_minibatches(
        self, data: TensorDictBase, epochs: int, minibatch_size: int, kl_limit: float = 0.0
    ) -> dict[str, torch.Tensor]:
        """``epochs`` passes of shuffled minibatches over ``data``, one update each; the mean of each metric.

        Only the entries an update reads are cut into minibatches (:meth:`update_keys`): the rollout also holds the
        next observations, rewards, flags and the collector's records, which GAE has already read, and indexing
        them for every minibatch was ~9 % of a PPO rollout at the tariff profile's settings (bench learner section).

        ``kl_limit`` > 0: no further epoch once the policy has moved more than this from the one that collected
        the rollout (:func:`~.health.approximate_kl` on the whole rollout after each epoch; Stable-Baselines3's and
        CleanRL's ``target_kl``, checked per epoch as CleanRL does); the epochs run are the ``epochs`` health signal.
        """
        # [envs, time] of a batched env (the twin) -> one pool of transitions
        data = data.select(*self.update_keys()).reshape(-1)
        shuffled = self._shuffled_rows_like(data)
        losses: list[dict[str, torch.Tensor]] = []
        for epochs_run in range(1, epochs + 1):
            permutation = torch.randperm(data.numel(), device=data.device)
            gather_rows(data, permutation, out=shuffled)
            for batch in shuffled.split(minibatch_size):
                losses.append(self.run_update(batch))
            if kl_limit > 0 and epochs_run < epochs and approximate_kl(self.actor, data) > kl_limit:
                break
        metrics = {key: torch.stack([step[key] for step in losses]).mean() for key in losses[0]}
        if kl_limit > 0:
            metrics[f"{HEALTH_PREFIX}epochs"] = torch.tensor(float(epochs_run))
        return metrics

    def _shuffled_rows_like(self, data: TensorDictBase) -> TensorDictBase:
        """The tensordict an epoch's shuffled rows are written into: allocated once and kept while the rollouts keep
        their keys, shapes, dtypes and device (a fresh one after any change)."""
        held = self._shuffled_rows
        if held is None or not same_layout(held, data):
            held = self._shuffled_rows = data.clone()
        return held

    def update_keys(self) -> list[Any]:
        """What the loss reads from a minibatch: the networks' inputs, the action, its log-probability at collection,
        and GAE's advantage, value target and state value."""
        keys = self.loss_module.tensor_keys
        read = [*self.actor.in_keys, *self.critic.in_keys, keys.action, keys.sample_log_prob]
        read += [keys.advantage, keys.value_target, keys.value]
        return list(dict.fromkeys(read))

    def loss_terms(self, batch: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The loss terms TorchRL's loss returns (``loss_*``), summed, and PPO's clip fraction to log."""
        losses = self.loss_module(batch)
        loss_names = [key for key in losses.keys() if key.startswith("loss_")]
        total = sum(losses[key] for key in loss_names)
        terms = {key: losses[key].detach() for key in loss_names}
        if "clip_fraction" in losses.keys():  # PPO: the share of ratios the surrogate clipped (a health signal)
            terms[f"{HEALTH_PREFIX}clip_fraction"] = losses["clip_fraction"].detach()
        return total, terms

    def update(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        """One gradient step on the summed losses, clipped to ``max_grad_norm`` (skipped if a loss or gradient is
        non-finite); the step's gradient norm before the clip is a health signal."""
        total, metrics = self.compute_losses(batch)
        loss_terms = " + ".join(key for key in metrics if key.startswith("loss_"))
        step = self.apply_gradients(total, metrics, (loss_terms,), clip_to=self.max_grad_norm)
        if step.applied and step.gradient_norm is not None:
            self.health.record_gradient_norm(step.gradient_norm)
        return metrics

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Under fp16 mixed precision only: clip the gradients to ``max_grad_norm`` and record their norm, here
        because Lightning's precision plugin unscales them inside the optimizer's step, right before this hook.
        Otherwise :meth:`update` has clipped them already, with the norm the non-finite check computed (the same
        function of the same tensors: ~3 % of a PPO update saved, docs/performance.md)."""
        if not self.gradients_scaled:
            return
        parameters = list(self.loss_module.parameters())
        if self.max_grad_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(parameters, self.max_grad_norm)
        else:
            norm = gradient_norm(parameters)
        self.health.record_gradient_norm(norm)
