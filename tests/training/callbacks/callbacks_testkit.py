"""A tiny real LightningModule that keeps the RL counters the callbacks read, and a CPU Trainer factory.

Imported by the callback tests (pytest puts this folder on ``sys.path``); the name is unique on purpose.
"""

from __future__ import annotations

import csv
from pathlib import Path

import lightning.pytorch as pl
import torch
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset

STEPS_PER_EPISODE = 4


class TinyRegression(pl.LightningModule):
    """Linear regression through a small MLP over a fixed random dataset: a plain LightningModule."""

    def __init__(self, batch_size: int = 8, hidden_size: int = 16, fail_at_batch: int | None = None, failure: str = ""):
        super().__init__()
        self.save_hyperparameters()
        self.batch_size = batch_size
        self.hidden_size = hidden_size
        self.fail_at_batch = fail_at_batch
        self.failure = failure
        layers = [torch.nn.Linear(4, hidden_size), torch.nn.Tanh(), torch.nn.Linear(hidden_size, 1)]
        self.net = torch.nn.Sequential(*layers)
        generator = torch.Generator().manual_seed(0)
        inputs = torch.randn(64, 4, generator=generator)
        self.dataset = TensorDataset(inputs, inputs.sum(dim=1, keepdim=True))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.dataset, batch_size=self.batch_size)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        if self.fail_at_batch is not None and self.global_step == self.fail_at_batch:
            self.fail()
        inputs, targets = batch
        loss = torch.nn.functional.mse_loss(self.net(inputs), targets)
        self.log("train/loss", loss, prog_bar=True)
        self.after_update(len(inputs), float(-loss.detach()))
        return loss

    def after_update(self, frames: int, reward: float) -> None:
        """Hook for the RL subclass; a plain module counts nothing."""

    def fail(self) -> None:
        if self.failure == "cuda-oom":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (injected by the test)")
        if self.failure == "cpu-oom":
            torch.empty(2**52, dtype=torch.uint8)  # a real allocation failure of the CPU allocator
        raise ValueError("an ordinary bug")


class TinyRLModule(TinyRegression):
    """The same model, counting like an RL agent: one batch is ``batch_size`` frames and one update."""

    def __init__(self, frame_budget: int | None = 10_000, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.frame_budget = frame_budget
        self.frames_done = 0
        self.updates_done = 0
        self.episodes_done = 0
        self.last_episode_return: float | None = None

    def after_update(self, frames: int, reward: float) -> None:
        self.frames_done += frames
        self.updates_done += 1
        if self.updates_done % STEPS_PER_EPISODE == 0:
            self.episodes_done += 1
            self.last_episode_return = reward

    def oom_advice(self) -> dict[str, object]:
        return {"batch_size": self.batch_size, "hidden_sizes": [self.hidden_size, self.hidden_size]}


def make_trainer(root: Path, callbacks: list[pl.Callback], max_steps: int = 20, **kwargs: object) -> pl.Trainer:
    options: dict[str, object] = {
        "accelerator": "cpu",
        "devices": 1,
        "max_steps": max_steps,
        "logger": CSVLogger(root, name="logs"),
        "log_every_n_steps": 5,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "enable_checkpointing": False,
        "default_root_dir": root,
    }
    options.update(kwargs)
    return pl.Trainer(callbacks=callbacks, **options)  # type: ignore[arg-type]


def logged_rows(trainer: pl.Trainer) -> list[dict[str, float]]:
    """The rows the CSVLogger wrote, each with only its non-empty cells."""
    path = Path(trainer.logger.log_dir) / "metrics.csv"  # type: ignore[union-attr]
    with open(path) as handle:
        return [{key: float(value) for key, value in row.items() if value != ""} for row in csv.DictReader(handle)]
