"""TorchRL's ``A2CLoss`` with a forward that calls the actor and critic on tensors.

Why: A2C makes one update per 512-frame rollout at the tariff profile's settings, and ``A2CLoss.forward`` spends
more around that update's arithmetic than in it: it copies the input tensordict, runs the actor and the critic
through their functional parameters (``to_module``), builds the actor's distribution to score the actions, builds an
output tensordict and reduces it key by key (issue 31: ours ran 3.4 ms an update where the plain loop's whole step
is about 2 ms).

The loss terms are the library's computation in the library's order (the log-probability's trailing dimension, the
product with the advantage, the critic's distance and ``critic_coeff``, the mean), so they are equal bit for bit and
so are their gradients (tests/fastpath/test_lean_a2c_loss.py). Every configuration this forward does not cover (an
entropy bonus, value clipping, a running advantage norm, advantages the loss would compute itself, loss masks, a
composite action, another reduction, parameters that are not the modules' own) goes to the library's forward.
"""

from __future__ import annotations

from tensordict import TensorDict, TensorDictBase
from torchrl.objectives import A2CLoss
from torchrl.objectives.utils import distance_loss

from iquitos_lightning.fastpath.direct_actor_critic import DirectActorCritic
from iquitos_lightning.fastpath.pins import require

require(A2CLoss, ["_loss_mask_keys"], library="torchrl", override=__name__)


class LeanA2CLoss(DirectActorCritic, A2CLoss):
    """``A2CLoss`` whose forward returns ``loss_objective`` and ``loss_critic``, computed on tensors."""

    def _lean_applies(self, tensordict: TensorDictBase) -> bool:
        """Whether this forward equals the library's on ``tensordict`` (else the library's forward runs)."""
        return (
            not self.entropy_bonus
            and not self.clip_value
            and self.advantage_norm is None
            and self.reduction == "mean"
            and self.critic_coeff is not None
            and tensordict.get(self.tensor_keys.advantage, None) is not None
            and not any(key in tensordict.keys(True) for key in self._loss_mask_keys())
            and self._modules_run_directly()
        )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self._lean_applies(tensordict):
            return super().forward(tensordict)
        advantage = tensordict.get(self.tensor_keys.advantage)
        log_prob = self._direct_log_prob(tensordict).unsqueeze(-1)
        state_value = self._direct_state_value(tensordict)
        target_return = tensordict.get(self.tensor_keys.value_target)
        critic = self.critic_coeff * distance_loss(target_return, state_value, loss_function=self.loss_critic_type)
        return TensorDict(
            {"loss_objective": (-(log_prob * advantage)).mean().squeeze(-1), "loss_critic": critic.mean().squeeze(-1)},
            batch_size=(),
        )
