"""TorchRL's ``SACLoss`` with a forward that calls the networks on tensors instead of through tensordicts.

Why: with 64x64 networks and a 256-row batch a SAC update is a few hundred small tensor operations, so Python's
cost per operation sets the learner's speed (issue 31), on the CPU and on a GPU alike (a lent H200 ran 58 SAC
updates a second, Python-bound). ``SACLoss.forward`` reaches the networks through TensorDict machinery: it clones
and copies the batch, swaps the actor's parameters in and out of its module (``to_module``) twice, runs the twin
Q networks through TensorDict's ``vmap`` three times, and builds its output tensordict. Measured on the tariff
profile's shapes (70 inputs, 2 actions, batch 256, one CPU thread): the library's forward 5.6 ms.

The loss terms are the library's computation in the library's order: the same network outputs, the same draws
(the target's next action first, then the actor's) through TanhNormal's own operations without building it
(:func:`~iquitos_lightning.fastpath.tanh_normal.rsample_and_log_prob`), the twin Q values as the broadcast matmuls
``torch.vmap`` computes over the same stacked parameters, the library's value estimator, distance and reduction
helpers.
So they are equal bit for bit and so are their gradients (tests/agents/test_lean_sac_loss.py). Every configuration
this forward does not cover (SAC v1 with a value network, prioritized-replay weights, skipping done states, a
reduction other than the mean, an actor whose parameters are copies) goes to the library's forward unchanged,
and so does a compiled update (``speed.compile``), where Python's cost per operation is compiled away.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule
from torch.func import functional_call
from torchrl.objectives import SACLoss
from torchrl.objectives.sac import compute_rsample_log_prob
from torchrl.objectives.utils import distance_loss

from iquitos_lightning.fastpath.direct_modules import RunsModulesDirectly, parameters_are_modules_own
from iquitos_lightning.fastpath.pins import require
from iquitos_lightning.fastpath.tanh_normal import (
    CachedSquashingBounds,
    distribution_parameters,
    network_then_distribution,
    rsample_and_log_prob,
    samples_like_tanh_normal,
)

# What this forward reads of SACLoss beyond its public API.
SAC_INTERNALS = [
    "_alpha", "_alpha_loss", "_cached_detached_qvalue_params", "_maybe_get_priority_weight", "_reduce_loss", "_version"
]  # fmt: skip
require(SACLoss, SAC_INTERNALS, library="torchrl", override=__name__)


class LeanSACLoss(RunsModulesDirectly, SACLoss):
    """``SACLoss`` (v2: twin Q, no value network) whose forward skips the tensordict plumbing around the networks."""

    _q_plan: list | bool | None = None  # _q_layers' answer, once known

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._bounds = CachedSquashingBounds()
        self._tanh_normal = samples_like_tanh_normal(self.actor_network)  # the actor's kind does not change
        self._stacked_cache: dict[int, tuple[TensorDictBase, dict[str, torch.Tensor]]] = {}

    def _lean_applies(self, tensordict: TensorDictBase) -> bool:
        """Whether this forward equals the library's on ``tensordict`` (else the library's forward runs). Not under
        ``torch.compile``: the library's forward compiles to one graph, this one's Python checks would break it."""
        return (
            not torch.compiler.is_compiling()
            and self._version == 2
            and self.reduction == "mean"
            and not self.skip_done_states
            and self._maybe_get_priority_weight(tensordict) is None
            and self._modules_run_directly()
        )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self._lean_applies(tensordict):
            return super().forward(tensordict)
        keys = self.tensor_keys
        observation = tensordict.get("observation")
        next_observation = tensordict.get(("next", "observation"))
        state = self._critic_state(tensordict, observation, ())  # what the Q networks read besides the action
        next_state = self._critic_state(tensordict, next_observation, ("next",))
        action = tensordict.get(keys.action)
        alpha = self._alpha

        # The soft Bellman target (qvalue_v2_loss's _compute_target_v2): the next action drawn first.
        with torch.no_grad():
            next_action, next_log_prob = self._draw(next_observation)
            next_q = self._twin_q(self.target_qvalue_network_params, next_state, next_action)
            if next_q.shape[-len(next_log_prob.shape) :] != next_log_prob.shape:
                next_log_prob = next_log_prob.unsqueeze(-1)
            next_state_value = (next_q - alpha * next_log_prob).min(0)[0]
            # The library sets it as the next state's value in a copy and lets the estimator read it back (its
            # value network is None); handing it over directly is the same arithmetic without the copy.
            target_value = self.value_estimator.value_estimate(tensordict, next_value=next_state_value).squeeze(-1)

        q_value = self._twin_q(self.qvalue_network_params, state, action).squeeze(-1)
        td_error = abs(q_value - target_value)
        loss_qvalue = distance_loss(q_value, target_value.expand_as(q_value), loss_function=self.loss_function).sum(0)
        loss_qvalue = self._reduce_loss(loss_qvalue, tensordict=tensordict, weights=None)

        # The actor's loss (actor_loss): a fresh draw, scored by the detached twin Q.
        new_action, log_prob = self._draw(observation)
        q_new = self._twin_q(self._cached_detached_qvalue_params, state, new_action)
        min_q = q_new.min(0)[0].squeeze(-1)
        if log_prob.shape != min_q.shape:
            raise RuntimeError(f"Losses shape mismatch: {log_prob.shape} and {min_q.shape}")
        loss_actor = self._reduce_loss(alpha * log_prob - min_q, tensordict=tensordict, weights=None)
        log_prob = log_prob.detach()
        loss_alpha = self._reduce_loss(self._alpha_loss(log_prob=log_prob), tensordict=tensordict, weights=None)
        tensordict.set(keys.priority, td_error.detach().max(0)[0])
        if loss_actor.shape != loss_qvalue.shape:
            raise RuntimeError(f"Losses shape mismatch: {loss_actor.shape}, {loss_qvalue.shape}")
        return TensorDict(
            {
                "loss_actor": loss_actor,
                "loss_qvalue": loss_qvalue,
                "loss_alpha": loss_alpha,
                "alpha": alpha,
                "entropy": (-log_prob).mean(),
            },
            batch_size=(),
        )

    def _draw(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised action at ``observation`` and its log-probability: the actor's network on the tensor,
        then TanhNormal's own operations without building the distribution (half of the draw's cost; equal values
        and gradients), or, for another distribution, the distribution as ``get_dist`` builds it."""
        distribution = self.actor_network.module[-1]
        parameters = distribution_parameters(self.actor_network, observation)
        if self._tanh_normal:
            return rsample_and_log_prob(
                parameters["loc"], parameters["scale"], self._bounds(distribution.distribution_kwargs)
            )
        built = distribution.distribution_class(**parameters, **distribution.distribution_kwargs)
        return compute_rsample_log_prob(built)

    def _critic_state(
        self, tensordict: TensorDictBase, observation: torch.Tensor, prefix: tuple[str, ...]
    ) -> tuple[torch.Tensor, ...]:
        """The Q networks' inputs before the action, in their order: the observation, and the critic's hindsight
        where the Q network reads it (envs/hindsight.py)."""
        extra = self.qvalue_network.in_keys[1:-1]
        return (observation, *(tensordict.get((*prefix, key)) for key in extra))

    def _twin_q(
        self, parameters: TensorDictBase, state: tuple[torch.Tensor, ...], action: torch.Tensor
    ) -> torch.Tensor:
        """Both Q networks at (``state``'s tensors, action), shape ``[2, *batch, 1]``, from their stacked parameters.

        A plain MLP on a flat batch runs as one broadcast ``matmul`` per layer over the stacked weights: the
        operations ``torch.vmap`` turns each layer into, without its per-call cost (equal bit for bit, gradients
        included: tests/agents/test_lean_sac_loss.py). Any other Q network runs through ``torch.vmap`` of the
        module over its parameters, the computation TensorDict's ``vmap`` runs, without the tensordicts."""
        stacked = self._stacked_by_name(parameters)
        layers = self._q_layers()
        if layers is not None and state[0].dim() == 2:
            hidden = torch.cat([*state, action], -1)  # TorchRL's MLP concatenates its inputs so
            for name, layer in layers:
                if name is None:  # an activation
                    hidden = layer(hidden)
                else:
                    weight, bias = stacked[f"{name}.weight"], stacked[f"{name}.bias"]
                    hidden = torch.matmul(hidden, weight.transpose(-1, -2)) + bias.unsqueeze(-2)
            return hidden
        module = self.qvalue_network.module

        def one(weights: dict[str, torch.Tensor], inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
            return functional_call(module, weights, inputs)

        return torch.vmap(one, (0, None), randomness=self.vmap_randomness)(stacked, (*state, action))

    def _stacked_by_name(self, parameters: TensorDictBase) -> dict[str, torch.Tensor]:
        """``parameters``' stacked tensors by their name in the Q module (``module.`` dropped). Kept per parameter
        set: the online, target and detached sets keep their tensors for the loss's life (the optimizers and the
        soft update change them in place), and reading a tensordict's leaves was ~0.1 ms an update."""
        cached = self._stacked_cache.get(id(parameters))
        if cached is None or cached[0] is not parameters:  # the set itself is kept, so its id is not reused
            stacked = {".".join(key[1:]): value for key, value in parameters.items(True, True)}
            cached = self._stacked_cache[id(parameters)] = (parameters, stacked)
        return cached[1]

    def _q_layers(self) -> list[tuple[str | None, torch.nn.Module]] | None:
        """The Q network's layers as (parameter prefix, module) for a Linear with a bias, (None, module) for a layer
        without parameters; None unless it is a sequence of just those (then :meth:`_twin_q` uses ``vmap``)."""
        if self._q_plan is None:
            module = self.qvalue_network.module
            plan: list[tuple[str | None, torch.nn.Module]] | bool = []
            if not isinstance(module, torch.nn.Sequential) or getattr(module, "_reshape_out", False):
                plan = False
            else:
                for name, layer in module.named_children():
                    if isinstance(layer, torch.nn.Linear) and layer.bias is not None:
                        plan.append((name, layer))
                    elif next(layer.parameters(), None) is None and not isinstance(layer, torch.nn.Linear):
                        plan.append((None, layer))
                    else:
                        plan = False
                        break
            self._q_plan = plan
        return self._q_plan or None

    def _forget_parameter_caches(self) -> None:
        self._stacked_cache = {}

    def _check_direct(self) -> bool:
        """The actor's module may be called on tensors (its parameters in the loss are the module's own; one network
        with a tuple of outputs, then one distribution) and the Q network reads the observation first and the action
        last (the critic's hindsight between them, if any)."""
        actor, q_value = self.actor_network, self.qvalue_network
        if not (network_then_distribution(actor) and isinstance(q_value, TensorDictModule)):
            return False
        if list(actor.module[0].in_keys) != ["observation"]:
            return False
        q_inputs = list(q_value.in_keys)
        if len(q_inputs) < 2 or q_inputs[0] != "observation" or q_inputs[-1] != self.tensor_keys.action:
            return False
        if list(q_value.out_keys) != [self.tensor_keys.state_action_value]:
            return False
        return parameters_are_modules_own([actor], [self.actor_network_params])
