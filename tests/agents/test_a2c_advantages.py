"""A2C's ``normalize_advantage`` (agents/a2c.py): the step reads the rollout's advantages standardised, as PPO's
minibatches do, and as the critic gives them when it is off."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from iquitos_lightning.agents import A2C, RolloutConfig
from iquitos_lightning.agents.a2c import ADVANTAGE, standardised
from tests.agents.agents_testkit import TINY_TWIN, cpu_trainer


class AdvantagesSeen(A2C):
    """A2C that keeps the advantages each of its steps read."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seen: list[torch.Tensor] = []

    def run_update(self, batch: Any) -> dict[str, torch.Tensor]:
        self.seen.append(batch[ADVANTAGE].detach().clone())
        return super().run_update(batch)


def test_standardised_values_have_mean_zero_and_unit_spread_and_a_constant_stays_finite():
    values = torch.tensor([[1.0, 3.0], [5.0, 7.0]])
    result = standardised(values)
    assert result.shape == values.shape
    assert result.mean().item() == pytest.approx(0.0, abs=1e-6) and result.std().item() == pytest.approx(1.0)
    assert torch.equal(standardised(torch.full((4,), 2.5)), torch.zeros(4))


@pytest.mark.parametrize("normalize", [True, False])
def test_each_step_reads_the_rollouts_advantages_standardised_only_when_asked(normalize: bool):
    torch.manual_seed(0)
    agent = AdvantagesSeen(
        env=TINY_TWIN,
        rollout=RolloutConfig(frame_budget=128, frames_per_batch=64, eval_every_frames=128, eval_episodes=0),
        hidden_sizes=(16, 16),
        normalize_advantage=normalize,
    )
    cpu_trainer().fit(agent)
    assert len(agent.seen) == 2 and agent.hparams["normalize_advantage"] is normalize
    spreads = [advantages.std().item() for advantages in agent.seen]
    if normalize:
        assert all(advantages.mean().abs().item() < 1e-5 for advantages in agent.seen)
        assert spreads == pytest.approx([1.0, 1.0])
    else:  # the critic's advantages as GAE wrote them: an untrained critic's are not at unit spread
        assert all(abs(spread - 1.0) > 0.05 for spread in spreads)
