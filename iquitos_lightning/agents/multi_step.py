"""n-step returns for the off-policy agents: TorchRL's ``MultiStep`` with the episode-end flags carried along.

Why: on the ``tariff`` objective the decision that sets an evening's peak (how much of the battery to spend at
18 h) shows its cost hours later, when the battery runs empty and the import jumps. A one-step critic must learn
that through its own bootstrapped values, hour by hour; an n-step target sums the next n rewards it really got
(and bootstraps ``gamma^n`` later), so the consequence reaches the decision in one update.

What :class:`torchrl.data.postprocs.MultiStep` does and what this adds: it replaces each transition's reward by
the discounted sum of up to ``n`` rewards of the same trajectory, its next observation by the one ``k <= n``
steps on, and writes ``steps_to_next_obs = k`` (TorchRL's TD(0) estimator, used by ``SACLoss``, then discounts
by ``gamma^k``). It leaves the ``done``/``terminated``/``truncated`` flags at the first step's values, so a
transition ``k`` steps before a *termination* would bootstrap from the terminal observation's value; here the
flags are taken from the step whose next observation is used (``terminated`` there means no bootstrap). Steps
near the end of a rollout see fewer than ``n`` future steps: their ``k`` is smaller, which is still a correct
k-step target. ``n_steps = 1`` returns the rollout unchanged.
"""

from __future__ import annotations

from tensordict import TensorDictBase
from torchrl.data.postprocs import MultiStep

FLAG_KEYS = ("done", "terminated", "truncated")
_CARRIED = "n_step_flags"  # the flags, copied where MultiStep moves observations (it does not move done keys)
# Written by MultiStep but not read by the losses: not stored in the replay buffer.
_UNUSED_KEYS = ("gamma", "nonterminal", ("next", "original_reward"))


def n_step_transitions(rollout: TensorDictBase, gamma: float, n_steps: int) -> TensorDictBase:
    """The rollout ([..., time]) with n-step rewards, next observations and end flags (module docstring)."""
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    if n_steps == 1:
        return rollout
    rollout = rollout.clone(False)
    following = rollout.get("next")
    following.set(_CARRIED, following.select(*FLAG_KEYS).clone())
    shifted = MultiStep(gamma=gamma, n_steps=n_steps)(rollout)
    following = shifted.get("next")
    following.update(following.get(_CARRIED))
    return shifted.exclude(*_UNUSED_KEYS, ("next", _CARRIED))
