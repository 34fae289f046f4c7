"""The matched hyperparameters of one algorithm, as both sides of the comparison read them.

Why one record: "matched settings" is only true if both runs are built from the same numbers; the
table prints this record next to the figures it produced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class AlgorithmSettings:
    """Hyperparameters shared by our agent and its Stable-Baselines3 counterpart."""

    algorithm: str  # "SAC", "PPO" or "A2C"
    hidden: int = 64  # width of the two hidden layers of every network
    rollout_frames: int = 50  # frames per rollout (SAC: SB3 train_freq; PPO/A2C: n_steps with one env)
    measured_frames: int = 200  # frames timed per round (after the warm-up)
    warmup_frames: int = 0  # SAC: random frames before learning (SB3 learning_starts); not timed
    batch_size: int = 128  # SAC: batch per update; PPO: minibatch; A2C: unused (whole rollout)
    updates_per_frame: float = 1.0  # SAC only (SB3 gradient_steps = rollout_frames x this)
    epochs: int = 4  # PPO only
    lr: float = 3e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95  # PPO/A2C
    max_grad_norm: float = 0.5  # PPO/A2C
    activation: str = "relu"  # SAC: relu (SB3's SAC default); PPO/A2C: tanh (SB3's default)

    @property
    def updates_per_rollout(self) -> float:
        if self.algorithm == "SAC":
            return self.rollout_frames * self.updates_per_frame
        if self.algorithm == "PPO":
            return self.epochs * math.ceil(self.rollout_frames / self.batch_size)
        return 1.0

    def describe(self) -> str:
        """The settings that matter for speed, as one table cell."""
        parts = [f"{self.hidden}x{self.hidden} {self.activation}", f"rollout {self.rollout_frames}", f"lr {self.lr:g}"]
        if self.algorithm == "SAC":
            parts += [f"batch {self.batch_size}", f"updates/frame {self.updates_per_frame:g}"]
        elif self.algorithm == "PPO":
            parts += [f"minibatch {self.batch_size}", f"epochs {self.epochs}"]
        parts.append(f"gamma {self.gamma:g}")
        return ", ".join(parts)


@dataclass(frozen=True)
class OurArchitecture:
    """How our side runs, the one difference the comparison allows: where it collects and whether it compiles."""

    num_workers: int = 1  # collection worker processes (1 and no overlap: in the training process)
    overlap: bool = False  # one worker collects the next rollout while this one trains (off-policy only)
    compiled: bool = False  # the update step runs torch.compile'd

    def describe(self) -> str:
        """``in-process``, ``2 workers`` or ``1 worker, one rollout ahead``, plus ``compiled update``, as one cell."""
        plural = "s" if self.num_workers > 1 else ""
        if self.overlap:
            collection = f"{self.num_workers} worker{plural}, one rollout ahead"
        else:
            collection = "in-process" if self.num_workers == 1 else f"{self.num_workers} workers"
        return f"{collection}, compiled update" if self.compiled else collection


IN_PROCESS = OurArchitecture()  # collection in the training process, eager update: SB3's own shape


# Sized so the whole bench stays under 10 minutes on the 2-core machine (docs/performance.md) while each
# timed window spans several rollouts (6 SAC, 8 PPO, 40 A2C). This machine's speed moves by tens of percent
# within seconds, so a window of 3-4 s (PPO 512 and A2C 480 frames before) moved a 2-round ratio by up to
# 0.3; the PPO and A2C windows now last 6-8 s (start-up, not the window, is most of a round's time).
DEFAULT_SETTINGS = {
    "SAC": AlgorithmSettings("SAC", rollout_frames=50, measured_frames=300, warmup_frames=50, batch_size=128),
    "PPO": AlgorithmSettings(
        "PPO", rollout_frames=128, measured_frames=1024, batch_size=64, epochs=4, activation="tanh"
    ),
    "A2C": AlgorithmSettings("A2C", rollout_frames=24, measured_frames=960, lr=7e-4, gae_lambda=1.0, activation="tanh"),
}
