"""GPU-only Trainer settings on a CPU machine: half precision falls back to 32-true, accelerator gpu is refused."""

from __future__ import annotations

import pytest

from iquitos_lightning.profile.devices import AcceleratorUnavailable, adapt_to_machine


@pytest.mark.parametrize("precision", ["16-mixed", 16, "16-true", "bf16-true"])
def test_half_precision_falls_back_to_32_true_on_cpu_and_says_why(precision):
    adapted = adapt_to_machine("auto", precision, cuda_available=False)
    assert adapted.precision == "32-true"
    assert adapted.note is not None and "falls back" in adapted.note


@pytest.mark.parametrize("accelerator", ["gpu", "cuda", "GPU"])
def test_explicit_gpu_accelerator_is_refused_without_cuda(accelerator):
    with pytest.raises(AcceleratorUnavailable, match="accelerator auto"):
        adapt_to_machine(accelerator, "16-mixed", cuda_available=False)


def test_settings_are_untouched_where_they_work():
    assert adapt_to_machine("auto", "16-mixed", cuda_available=True).note is None
    assert adapt_to_machine("auto", "16-mixed", cuda_available=True).precision == "16-mixed"
    kept = adapt_to_machine("cpu", "bf16-mixed", cuda_available=False, precision_typed=True)
    assert (kept.accelerator, kept.precision, kept.note) == ("cpu", "bf16-mixed", None)  # typed: it runs


def test_a_config_files_bf16_mixed_falls_back_on_a_cpu_where_it_only_runs_slower():
    adapted = adapt_to_machine("auto", "bf16-mixed", cuda_available=False, precision_typed=False)
    assert adapted.precision == "32-true" and "falls back" in adapted.note


@pytest.mark.parametrize(("capability", "fallback"), [((7, 5), "16-mixed"), ((6, 1), "32-true")])
def test_a_config_files_bf16_mixed_falls_back_on_a_gpu_without_bf16_tensor_cores(capability, fallback):
    older = adapt_to_machine(
        "auto", "bf16-mixed", cuda_available=True, precision_typed=False, cuda_capability=capability
    )
    assert older.precision == fallback and "no bf16 tensor cores" in older.note
    ampere = adapt_to_machine("auto", "bf16-mixed", cuda_available=True, precision_typed=False, cuda_capability=(8, 6))
    assert (ampere.precision, ampere.note) == ("bf16-mixed", None)
    typed = adapt_to_machine("auto", "bf16-mixed", cuda_available=True, precision_typed=True, cuda_capability=(7, 5))
    assert typed.precision == "bf16-mixed"  # what the user typed runs (emulated, slowly)
