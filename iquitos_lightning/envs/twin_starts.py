"""Where a twin's episodes start: at hour 0 (CityLearn's episode), staggered over the year, or at random hours.

Why: a training twin of B envs that all started in January would show one rollout B copies of the same hours; a
start schedule spreads them over the year (``env.training.start``). The schedules are a choice of the env's options
(envs/env_config.py checks them) and a rule of its reset (envs/twin.py), kept here apart from both.
"""

from __future__ import annotations

import torch

ZERO, STAGGERED, RANDOM = "zero", "staggered", "random"
# Where the episodes of a training twin start: "zero" (hour 0, CityLearn's episode), "staggered" (env b of B first
# starts at hour b x T / B; each next episode starts where the last one ended, wrapping at the year's end) or
# "random" (a uniform hour, from a generator seeded by ``seed``). A mid-session start gives the plugged EV its
# session's arrival SOC; the BESS starts at the schema's initial SOC; the month-to-date peak (tariff) at the
# reference run's value at that hour (``references.start_peaks``, envs/reference_tables.py), or at 0.
START_SCHEDULES = (ZERO, STAGGERED, RANDOM)


def first_staggered_starts(envs: int, hours: int, device: torch.device) -> torch.Tensor:
    """[B] the staggered schedule's first start of each env: env b of B at hour b x T / B."""
    return torch.arange(envs, device=device) * hours // envs


def first_steps(
    schedule: str,
    reset: torch.Tensor,
    clocks: torch.Tensor,
    next_start: torch.Tensor,
    *,
    hours: int,
    episode_hours: int | None,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """[B] the step each env's new episode starts at by ``schedule`` (only the ``reset`` envs use it), and the
    staggered schedule's next starts after it (``next_start`` itself for the other schedules). ``clocks``: the envs'
    clocks, which give the shape and device; "random" draws from ``generator``."""
    if schedule == ZERO:
        return torch.zeros_like(clocks), next_start
    if schedule == RANDOM:
        last = hours - (episode_hours or 1)
        drawn = torch.randint(0, max(last, 0) + 1, (len(clocks),), generator=generator)
        return drawn.to(clocks.device), next_start
    first = next_start.clone()
    length = episode_hours or hours
    ends = torch.clamp(first + length, max=hours)
    return first, torch.where(reset, ends % hours, next_start)
