"""Rewards divided by a running estimate of the std of the discounted return (CleanRL's / SB3's reward normalisation).

Why: the critic of PPO and A2C regresses returns whose scale depends on the task (the tariff objective's rewards
per step: mean -0.24, std 2.5, minimum -76; the thesis objective's -0.09 +- 0.08), and with a fixed
``reward_scale`` of 1 the tariff critic's explained variance stayed 0. Dividing by the std of the discounted
return (not of the reward) puts the value targets near unit scale whatever the objective, without knowing it in
advance. The mean is not subtracted: shifting every reward by a constant would turn ending an episode into a reward
or a penalty, changing which policy is best.

What it computes, as gym's ``NormalizeReward`` (gym 0.21, which CleanRL's PPO uses) and SB3's ``VecNormalize``:
per parallel env a discounted return ``G <- gamma * G + r``, reset to 0 after a step that ends an episode
(``done``: terminated or truncated), and a running mean and variance of every ``G`` seen (Chan's parallel merge,
float64, starting from count 1e-4, mean 0, variance 1 as gym's ``RunningMeanStd``). Rewards are divided by
``sqrt(var + eps)``. One difference: gym divides each step's rewards by the std known at that step; here the
whole rollout is first added to the statistics, then all its rewards are divided by the one resulting std, so the
value targets of one batch share one scale (the two agree once the std has settled).

Where it lives: the agent owns it (not an env transform) because it is learning state: it is saved in the
checkpoint's ``rl_state`` (:meth:`RewardNormalizer.state_dict`) and updated only from training rollouts, never from
evaluation, with the returns in progress: a run on the twin resumes in the middle of its episodes, so they go on
(:mod:`.resume`); one that starts fresh episodes (CityLearn and Gymnasium mid-episode) starts them at 0, as the env.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

INITIAL_COUNT = 1e-4  # gym's RunningMeanStd(epsilon=1e-4): a prior of variance 1 worth a ten-thousandth of a sample


class RewardNormalizer:
    """Running std of the discounted return of a rollout stream; rollouts are ``[*batch, time]`` TensorDicts.

    The batch dims are the parallel envs (``[]`` for one env, ``[envs]`` for the batched twin, ``[workers]`` with
    worker processes); time is the last dim, and the rollouts must arrive in time order.
    """

    def __init__(self, gamma: float, epsilon: float = 1e-8) -> None:
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.gamma = gamma
        self.epsilon = epsilon
        self.count = torch.tensor(INITIAL_COUNT, dtype=torch.float64)
        self.mean = torch.tensor(0.0, dtype=torch.float64)
        self.var = torch.tensor(1.0, dtype=torch.float64)
        self.returns: torch.Tensor | None = None  # per env, the discounted return of its episode so far

    @property
    def std(self) -> float:
        """What rewards are divided by."""
        return float((self.var + self.epsilon).sqrt())

    def update(self, reward: torch.Tensor, done: torch.Tensor) -> None:
        """Step the returns through ``reward`` [*batch, time, 1] (reset after each ``done``) and add them all to the
        running statistics. A rollout with a non-finite reward changes nothing: one broken rollout would otherwise
        turn every later reward into NaN (its update is skipped by the non-finite guard anyway)."""
        rewards = reward.detach().to("cpu", torch.float64).squeeze(-1)
        dones = done.detach().to("cpu").squeeze(-1).bool()
        if not torch.isfinite(rewards).all():
            return
        batch_shape = rewards.shape[:-1]
        returns = self.returns if self.returns is not None and self.returns.shape == batch_shape else None
        if returns is None:
            returns = torch.zeros(batch_shape, dtype=torch.float64)
        seen = []
        for step in range(rewards.shape[-1]):
            returns = returns * self.gamma + rewards[..., step]
            seen.append(returns)
            returns = returns.masked_fill(dones[..., step], 0.0)
        self.returns = returns
        self._merge(torch.stack(seen, dim=-1).reshape(-1))

    def _merge(self, values: torch.Tensor) -> None:
        """Chan et al.'s parallel update of count, mean and (population) variance, as gym's ``RunningMeanStd``."""
        batch_count = values.numel()
        if batch_count == 0:
            return
        batch_mean = values.mean()
        batch_var = values.var(unbiased=False)
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        m2 = self.var * self.count + batch_var * batch_count + delta.square() * self.count * batch_count / total
        self.var = m2 / total
        self.count = total

    def normalize_rollout(self, rollout: TensorDictBase) -> None:
        """Update from the rollout's ``("next", "reward")`` and ``("next", "done")``, then divide its rewards."""
        reward = rollout["next", "reward"]
        self.update(reward, rollout["next", "done"])
        rollout["next", "reward"] = reward / torch.tensor(self.std, dtype=reward.dtype, device=reward.device)

    def reset_returns(self) -> None:
        """Forget the returns in progress (the envs start fresh episodes, e.g. on resume)."""
        self.returns = None

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The running statistics and the returns in progress, as tensors (what a ``weights_only`` load accepts)."""
        state = {"count": self.count.clone(), "mean": self.mean.clone(), "var": self.var.clone()}
        if self.returns is not None:
            state["returns"] = self.returns.clone()
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor], *, episodes_go_on: bool = False) -> None:
        """The running statistics of ``state``; its returns in progress too if ``episodes_go_on`` (the envs continue
        the saved episodes: the twin), else they restart at 0."""
        self.count = state["count"].to(torch.float64).clone()
        self.mean = state["mean"].to(torch.float64).clone()
        self.var = state["var"].to(torch.float64).clone()
        self.reset_returns()
        if episodes_go_on and "returns" in state:
            self.returns = state["returns"].to(torch.float64).clone()
