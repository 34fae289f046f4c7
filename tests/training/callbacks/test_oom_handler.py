"""OutOfMemoryHandler: an OOM mid-training leaves a loadable emergency checkpoint, a report with overrides, exit 3."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from callbacks_testkit import TinyRegression, TinyRLModule, make_trainer
from lightning.pytorch.callbacks import ModelCheckpoint

from iquitos_lightning.callbacks import OOM_EXIT_CODE, OutOfMemoryHandler, exit_on_out_of_memory
from iquitos_lightning.training.callbacks.oom import EMERGENCY_CHECKPOINT_NAME, is_out_of_memory, suggest_overrides

FAIL_AT = 6


def test_injected_cuda_oom_saves_emergency_checkpoint_and_prints_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = TinyRLModule(batch_size=8, hidden_size=16, fail_at_batch=FAIL_AT, failure="cuda-oom")
    trainer = make_trainer(tmp_path, [OutOfMemoryHandler()], max_steps=20)
    with pytest.raises(torch.cuda.OutOfMemoryError) as raised:
        trainer.fit(module)

    path = tmp_path / EMERGENCY_CHECKPOINT_NAME
    checkpoint = torch.load(path, weights_only=False)
    assert checkpoint["global_step"] == FAIL_AT  # every update done before the failure is in it
    for name, tensor in module.state_dict().items():
        assert torch.equal(checkpoint["state_dict"][name], tensor)
    assert checkpoint["optimizer_states"]

    report = capsys.readouterr().err
    assert "OUT OF MEMORY: GPU memory" in report
    assert "Tried to allocate 20.00 GiB" in report
    assert "batch_size=8" in report and "hidden_sizes=[16, 16]" in report
    assert "--model.batch_size=4 --model.hidden_sizes=[8,8]" in report
    assert f"emergency checkpoint saved: {path}" in report
    assert any(str(path) in note for note in raised.value.__notes__)


def test_emergency_checkpoint_resumes_training(tmp_path: Path) -> None:
    trainer = make_trainer(tmp_path, [OutOfMemoryHandler()], max_steps=10)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        trainer.fit(TinyRLModule(fail_at_batch=FAIL_AT, failure="cuda-oom"))

    resumed = make_trainer(tmp_path / "resumed", [], max_steps=10)
    resumed.fit(TinyRLModule(), ckpt_path=tmp_path / EMERGENCY_CHECKPOINT_NAME)
    assert resumed.global_step == 10


def test_real_cpu_allocation_failure_is_handled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trainer = make_trainer(tmp_path, [OutOfMemoryHandler(dirpath=tmp_path / "rescue")], max_steps=10)
    with pytest.raises(RuntimeError, match="DefaultCPUAllocator"):
        trainer.fit(TinyRLModule(fail_at_batch=3, failure="cpu-oom"))

    assert torch.load(tmp_path / "rescue" / EMERGENCY_CHECKPOINT_NAME, weights_only=False)["global_step"] == 3
    report = capsys.readouterr().err
    assert "OUT OF MEMORY: host RAM" in report and "peak memory:" in report
    assert "--model.batch_size=4" in report


def test_checkpoint_goes_to_the_model_checkpoint_folder(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    callbacks = [ModelCheckpoint(dirpath=checkpoints), OutOfMemoryHandler()]
    trainer = make_trainer(tmp_path, callbacks, max_steps=10, enable_checkpointing=True)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        trainer.fit(TinyRLModule(fail_at_batch=2, failure="cuda-oom"))
    assert (checkpoints / EMERGENCY_CHECKPOINT_NAME).is_file()


def test_failed_save_is_reported_and_the_oom_still_propagates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("a file where the checkpoint folder should be")
    trainer = make_trainer(tmp_path, [OutOfMemoryHandler(dirpath=not_a_folder)], max_steps=10)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        trainer.fit(TinyRLModule(fail_at_batch=2, failure="cuda-oom"))
    report = capsys.readouterr().err
    assert "emergency checkpoint could NOT be saved" in report
    assert "--ckpt_path" not in report


def test_other_errors_pass_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trainer = make_trainer(tmp_path, [OutOfMemoryHandler()], max_steps=10)
    with pytest.raises(ValueError, match="an ordinary bug"):
        trainer.fit(TinyRLModule(fail_at_batch=2, failure="bug"))
    assert not (tmp_path / EMERGENCY_CHECKPOINT_NAME).exists()
    assert "OUT OF MEMORY" not in capsys.readouterr().err


def test_oom_exits_with_status_3_and_other_errors_keep_theirs(tmp_path: Path) -> None:
    trainer = make_trainer(tmp_path, [OutOfMemoryHandler()], max_steps=10)
    with pytest.raises(SystemExit) as exited, exit_on_out_of_memory():
        trainer.fit(TinyRLModule(fail_at_batch=2, failure="cuda-oom"))
    assert exited.value.code == OOM_EXIT_CODE == 3
    with pytest.raises(ValueError), exit_on_out_of_memory():
        raise ValueError("not memory")


def test_plain_module_advice_comes_from_hyperparameters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trainer = make_trainer(tmp_path, [OutOfMemoryHandler()], max_steps=10)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        trainer.fit(TinyRegression(batch_size=32, hidden_size=64, fail_at_batch=1, failure="cuda-oom"))
    assert "--model.batch_size=16 --model.hidden_size=32" in capsys.readouterr().err


def test_overrides_halve_sizes_and_skip_everything_else() -> None:
    sizes = {
        "batch_size": 256,
        "hidden_sizes": [256, 128],
        "learning_rate": 3e-4,
        "compile": True,
        "data.batch_size": 64,
        "num_envs": 1,
        "activation": "relu",
    }
    assert suggest_overrides(sizes) == [
        "--model.batch_size=128",
        "--model.hidden_sizes=[128,64]",
        "--data.batch_size=32",
    ]
    assert suggest_overrides({"batch_size": 256}, prefix="model.init_args.") == ["--model.init_args.batch_size=128"]


def test_out_of_memory_is_recognised() -> None:
    assert is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes"))
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("shape mismatch"))
    assert not is_out_of_memory(KeyboardInterrupt())
