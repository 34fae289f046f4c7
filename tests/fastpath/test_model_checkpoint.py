"""AtomicModelCheckpoint (fastpath/model_checkpoint.py): Lightning's own files, with ``last`` swapped atomically."""

from __future__ import annotations

import os
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.demos.boring_classes import BoringModel

from iquitos_lightning.fastpath.model_checkpoint import AtomicModelCheckpoint


def _fit(callback: ModelCheckpoint, root: Path) -> None:
    torch.manual_seed(0)
    trainer = pl.Trainer(
        default_root_dir=root,
        max_epochs=3,
        limit_train_batches=2,
        limit_val_batches=1,
        callbacks=[callback],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(BoringModel())


def _files(folder: Path) -> dict[str, str | None]:
    return {path.name: os.readlink(path) if path.is_symlink() else None for path in sorted(folder.iterdir())}


def test_same_files_as_lightnings_model_checkpoint(tmp_path: Path) -> None:
    options = {"filename": "{epoch}", "save_top_k": 2, "monitor": "step", "mode": "max", "save_last": "link"}
    _fit(ModelCheckpoint(dirpath=tmp_path / "lightning", **options), tmp_path)
    _fit(AtomicModelCheckpoint(dirpath=tmp_path / "atomic", **options), tmp_path)
    assert (
        _files(tmp_path / "atomic")
        == _files(tmp_path / "lightning")
        == {
            "epoch=1.ckpt": None,
            "epoch=2.ckpt": None,
            "last.ckpt": "epoch=2.ckpt",
        }
    )


def test_save_checkpoints_removes_the_replaced_file_only_after_last_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save on demand (what FrameCheckpoint does every N frames): when the replaced file is deleted, ``last``
    already points at the new one, so ``last`` never resolves to a missing file."""
    removals: list[tuple[str, str]] = []
    lightning_remove = ModelCheckpoint._remove_checkpoint

    def remove(self: ModelCheckpoint, trainer: pl.Trainer, filepath: str) -> None:  # where files really go
        removals.append((Path(filepath).name, os.readlink(Path(self.dirpath) / "last.ckpt")))
        lightning_remove(self, trainer, filepath)

    monkeypatch.setattr(ModelCheckpoint, "_remove_checkpoint", remove)

    class SavesEachEpoch(AtomicModelCheckpoint):
        def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
            self.save_checkpoints(trainer)

    callback = SavesEachEpoch(
        dirpath=tmp_path / "ckpt", filename="{epoch}", save_top_k=1, save_last="link", every_n_epochs=0
    )
    _fit(callback, tmp_path)
    assert removals == [("epoch=0.ckpt", "epoch=1.ckpt"), ("epoch=1.ckpt", "epoch=2.ckpt")]
    assert os.path.realpath(tmp_path / "ckpt" / "last.ckpt") == str(tmp_path / "ckpt" / "epoch=2.ckpt")
