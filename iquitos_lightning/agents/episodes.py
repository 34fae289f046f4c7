"""One evaluation episode: the deterministic policy over a whole episode of an env, without touching training.

Why apart: validation, test, the final test and the test-year tables (``experiments/unseen_years.py``) all play the
policy this way, and each detail matters for their figures to be comparable: the episode is seeded by its index, the
global RNGs are forked (evaluating never changes training), the policy acts at its mode in full precision.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torchrl.envs import EnvBase, ExplorationType, set_exploration_type

from iquitos_lightning.envs.factory import episode_seeding
from iquitos_lightning.fastpath.tanh_normal import evaluation_policy


def play_episode(
    policy: TensorDictModule, env: EnvBase, episode: int, max_steps: int, device: torch.device
) -> tuple[float, TensorDictBase]:
    """Return and rollout of episode ``episode`` of ``env`` under ``policy``'s deterministic actions; a TanhNormal
    actor runs as :class:`~iquitos_lightning.fastpath.tanh_normal.DeterministicTanhNormalPolicy` (the same actions,
    bit for bit, without a distribution built per step: a year is 8,760 sequential calls).

    Why autocast is off: Lightning casts the evaluation loops under a mixed precision, while the collector (the
    dataloader) runs the same policy outside it; a bf16-mixed evaluation also handed the env bf16 actions, which
    NumPy has no type for (every bf16-mixed fit with evaluation crashed at its first evaluation)."""
    episode_seeding(env).resets_done = episode
    cuda = [device.index or 0] if device.type == "cuda" else []
    full_precision = torch.autocast(device.type, enabled=False)
    deterministic = set_exploration_type(ExplorationType.DETERMINISTIC)
    with torch.random.fork_rng(devices=cuda), torch.no_grad(), full_precision, deterministic:
        rollout = env.rollout(max_steps, evaluation_policy(policy), auto_cast_to_device=True, break_when_any_done=True)
    return float(rollout["next", "reward"].sum()), rollout
