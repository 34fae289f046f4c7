"""The agents' per-rollout metrics reach the loggers as ``self.log_dict(on_step=True)`` would send them: same rows,
steps, epochs and cadence (the equivalence test of fastpath/rollout_logging.py's use of Lightning's connector)."""

from __future__ import annotations

import csv

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

from iquitos_lightning.fastpath.rollout_logging import log_rollout_metrics


class LogsBothWays(pl.LightningModule):
    """Each batch logs the same values as ``lightning/*`` through ``self.log_dict`` in ``training_step`` and as
    ``direct/*`` through :func:`log_rollout_metrics` in ``on_train_batch_end`` (as RLAgent does); both ways must
    give the loggers the same rows."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.pending: dict[str, float] = {}

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        loss = self.layer(batch).pow(2).mean()
        values = {"loss": float(loss.detach()), "batch": float(batch_idx), "epoch_seen": float(self.current_epoch)}
        self.log_dict({f"lightning/{k}": v for k, v in values.items()}, on_step=True, on_epoch=False, batch_size=1)
        self.pending = {f"direct/{k}": v for k, v in values.items()}
        return loss

    def on_train_batch_end(self, outputs: object, batch: torch.Tensor, batch_idx: int) -> None:
        log_rollout_metrics(self.trainer, self.pending)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self) -> torch.utils.data.DataLoader:
        return torch.utils.data.DataLoader(torch.arange(7.0).reshape(7, 1), batch_size=1)


class StopAfter(pl.Callback):
    """Asks the trainer to stop in its ``on_train_batch_end`` (as the Ctrl-C handler and time limits do): Lightning
    logs that batch whatever the cadence."""

    def __init__(self, batches: int) -> None:
        self.batches = batches
        self.seen = 0

    def on_train_batch_end(self, trainer: pl.Trainer, *args: object) -> None:
        self.seen += 1
        trainer.should_stop = self.seen >= self.batches


@pytest.mark.parametrize(("every", "stop_after", "expected_rows"), [(1, 99, 14), (3, 99, 4), (3, 11, 4), (5, 12, 3)])
def test_direct_rows_equal_log_dicts_rows(tmp_path, every, stop_after, expected_rows):
    trainer = pl.Trainer(
        max_epochs=2,
        callbacks=[StopAfter(stop_after)],
        accelerator="cpu",
        logger=CSVLogger(tmp_path, name="run"),
        log_every_n_steps=every,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(LogsBothWays())

    with open(tmp_path / "run" / "version_0" / "metrics.csv") as file:
        rows = list(csv.DictReader(file))
    by_way: dict[str, list[tuple[str, str, dict[str, str]]]] = {"lightning": [], "direct": []}
    for row in rows:
        for way, found in by_way.items():
            values = {key.split("/", 1)[1]: value for key, value in row.items() if key.startswith(way) and value}
            if values:
                found.append((row["step"], row["epoch"], values))
    assert by_way["direct"] == by_way["lightning"]
    # 14 batches in all; logged every `every`, and the batch a callback stopped at (the 11th, the 12th)
    assert len(by_way["direct"]) == expected_rows
    # trainer.logged_metrics holds the last row the loggers got (test_numerical_faults reads it)
    assert trainer.logged_metrics["direct/batch"] == float(by_way["direct"][-1][2]["batch"])
