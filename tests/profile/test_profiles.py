"""The profile choice for described devices (RTX 4060, RTX 4080, H100, older GPUs, CPU), the override rule and the
memory refusals. A GPU is described by a DeviceInfo (data), so every case runs on the CPU machine."""

from __future__ import annotations

import pytest

from iquitos_lightning.profile.hardware import GIB, DeviceInfo
from iquitos_lightning.profile.memory_budget import InsufficientMemory, Workload
from iquitos_lightning.profile.profiles import choose_profile, print_profile_table

# The Iquitos site: 532 observations (20 site + 4 x 128 sockets), BESS + 128 sockets; a stored transition (obs,
# next obs, action, loc, scale, flags) is ~5.9 kB. SAC collects 730 frames per rollout.
IQUITOS = Workload(observation_dim=532, action_dim=129, transition_bytes=5_900, frames_per_batch=730)


def gpu(name: str, total_gib: float, capability: tuple[int, int], *, free_gib: float | None = None, host_gib=64.0):
    return DeviceInfo(
        accelerator="cuda",
        name=name,
        total_memory_bytes=int(total_gib * GIB),
        free_memory_bytes=int((free_gib if free_gib is not None else total_gib - 0.4) * GIB),
        host_ram_bytes=int(host_gib * GIB),
        host_available_bytes=int(host_gib * 0.75 * GIB),
        cpu_cores=16,
        compute_capability=capability,
    )


def cpu(cores: int = 2, available_gib: float = 20.0) -> DeviceInfo:
    return DeviceInfo(
        accelerator="cpu",
        name=f"CPU ({cores} cores)",
        total_memory_bytes=int(32 * GIB),
        free_memory_bytes=int(available_gib * GIB),
        host_ram_bytes=int(32 * GIB),
        host_available_bytes=int(available_gib * GIB),
        cpu_cores=cores,
    )


RTX_4060_LAPTOP = gpu("NVIDIA GeForce RTX 4060 Laptop GPU", 8.0, (8, 9), free_gib=7.3)
RTX_4080 = gpu("NVIDIA GeForce RTX 4080", 15.99, (8, 9))
H100 = gpu("NVIDIA H100 80GB HBM3", 79.1, (9, 0), host_gib=512.0)
T4 = gpu("Tesla T4", 14.75, (7, 5))
GTX_1080 = gpu("NVIDIA GeForce GTX 1080", 7.9, (6, 1))
V100_32GB = gpu("Tesla V100-SXM2-32GB", 31.7, (7, 0))


def test_cpu_machine_gets_the_cpu_settings():
    choice = choose_profile(cpu(), "sac", {}, IQUITOS)
    assert choice.profile_class == "cpu"
    assert choice.value("trainer.precision") == "32-true"
    assert choice.value("model.hidden_sizes") == [64, 64]
    assert choice.value("model.batch_size") == 128
    assert choice.value("model.buffer.capacity") == 200_000
    assert choice.value("model.buffer.storage") == "memory"
    assert not choice.value("model.speed.compile") and not choice.value("model.speed.cuda_graphs")  # eager: faster
    assert not choice.value("model.speed.tf32")
    assert all(setting.source == "auto" for setting in choice.settings)
    assert not choose_profile(cpu(), "a2c", {}, IQUITOS).value("model.speed.compile")  # measured: no gain for A2C
    assert choose_profile(cpu(), "ppo", {}, IQUITOS).value("model.speed.compile")  # measured: 1.2x on the twin
    assert choice.value("model.speed.fused_adam")  # measured: SAC 1.06x, PPO 1.05x compiled
    assert choose_profile(cpu(), "ppo", {}, IQUITOS).value("model.speed.fused_adam")
    assert not choose_profile(cpu(), "a2c", {}, IQUITOS).value("model.speed.fused_adam")  # no gain for A2C


def test_rtx_4060_laptop_gets_the_8gb_profile_sac_and_ppo_in_bf16_with_cuda_graphs_a2c_in_16_mixed():
    choice = choose_profile(RTX_4060_LAPTOP, "sac", {}, IQUITOS)
    assert choice.profile_class == "gpu-8gb"
    # measured in whole fits: 6.3x 16-mixed eager (which CUDA graphs cannot capture); Ada (8.9) has bf16
    assert choice.value("trainer.precision") == "bf16-mixed" and choice.value("model.speed.cuda_graphs") is True
    ppo = choose_profile(RTX_4060_LAPTOP, "ppo", {}, IQUITOS)  # measured in whole fits: 2.6x 16-mixed eager
    assert ppo.value("trainer.precision") == "bf16-mixed" and ppo.value("model.speed.cuda_graphs") is True
    a2c = choose_profile(RTX_4060_LAPTOP, "a2c", {}, IQUITOS)  # measured: collection-bound, the card's 16-mixed stays
    assert a2c.value("trainer.precision") == "16-mixed" and a2c.value("model.speed.cuda_graphs") is False
    precision = next(s for s in a2c.settings if s.key == "trainer.precision")
    assert "bf16-mixed" in precision.why  # offered, not imposed
    typed_ppo = choose_profile(RTX_4060_LAPTOP, "ppo", {"trainer.precision": "16-mixed"}, IQUITOS)
    assert typed_ppo.value("model.speed.cuda_graphs") is False
    annealed = choose_profile(RTX_4060_LAPTOP, "ppo", {"model.lr_anneal": True}, IQUITOS)
    assert annealed.value("model.speed.cuda_graphs") is False  # the agent refuses annealing under CUDA graphs
    typed_fp16 = choose_profile(RTX_4060_LAPTOP, "sac", {"trainer.precision": "16-mixed"}, IQUITOS)
    assert typed_fp16.value("model.speed.cuda_graphs") is False  # its GradScaler cannot be captured
    graphs_why = next(s.why for s in typed_fp16.settings if s.key == "model.speed.cuda_graphs")
    assert "GradScaler" in graphs_why
    typed_fp32 = choose_profile(RTX_4060_LAPTOP, "sac", {"trainer.precision": "32-true"}, IQUITOS)
    graphs_why = next(s.why for s in typed_fp32.settings if s.key == "model.speed.cuda_graphs")
    assert typed_fp32.value("model.speed.cuda_graphs") is False and "can opt in" in graphs_why  # capturable, unmeasured
    assert choice.value("model.hidden_sizes") == [256, 256]
    assert choice.value("model.batch_size") == 256
    assert choice.value("model.speed.tf32") is True and choice.value("trainer.benchmark") is True
    assert choice.device_memory.total < RTX_4060_LAPTOP.free_memory_bytes / 4  # far from the 8 GB limit


def test_rtx_4080_gets_the_16gb_profile_with_a_larger_batch():
    choice = choose_profile(RTX_4080, "sac", {}, IQUITOS)
    assert choice.profile_class == "gpu-16gb"
    assert choice.value("model.batch_size") == 512
    assert choice.value("trainer.precision") == "bf16-mixed"
    assert choose_profile(RTX_4080, "a2c", {}, IQUITOS).value("trainer.precision") == "16-mixed"


def test_h100_gets_the_datacenter_profile_in_bf16_with_a_2m_buffer():
    choice = choose_profile(H100, "sac", {}, IQUITOS)
    assert choice.profile_class == "gpu-datacenter"
    assert choice.value("trainer.precision") == "bf16-mixed"
    assert choice.value("model.hidden_sizes") == [512, 512]
    assert choice.value("model.batch_size") == 1024
    assert choice.value("model.buffer.capacity") == 2_000_000


@pytest.mark.parametrize(
    ("device", "profile_class", "precision", "tf32"),
    [
        (GTX_1080, "gpu-8gb", "32-true", False),  # Pascal: no fp16 tensor cores
        (T4, "gpu-16gb", "16-mixed", False),  # Turing: fp16 yes, bf16/TF32 no
        (V100_32GB, "gpu-datacenter", "16-mixed", False),  # Volta: no bf16, so no bf16-mixed either
    ],
)
def test_older_gpus_get_only_the_precisions_they_run_fast(device, profile_class, precision, tf32):
    choice = choose_profile(device, "sac", {}, IQUITOS)
    assert choice.profile_class == profile_class
    assert choice.value("trainer.precision") == precision
    assert choice.value("model.speed.tf32") is tf32
    assert choice.value("model.speed.cuda_graphs") is False  # no bf16: nothing SAC's update can be captured in


def test_explicit_settings_win_and_the_table_says_so(capsys):
    overrides = {"model.batch_size": 64, "trainer.precision": "32-true"}
    choice = choose_profile(RTX_4060_LAPTOP, "sac", overrides, IQUITOS)
    assert choice.value("model.batch_size") == 64
    assert choice.value("trainer.precision") == "32-true"
    batch = next(s for s in choice.settings if s.key == "model.batch_size")
    assert batch.source == "explicit" and "auto would pick 256" in batch.why
    assert choice.value("model.hidden_sizes") == [256, 256]  # the rest stays automatic
    assert set(choice.automatic_values()) >= {"model.hidden_sizes", "model.buffer.capacity"}
    assert "model.batch_size" not in choice.automatic_values()
    print_profile_table(choice)
    printed = capsys.readouterr().out
    assert "explicit: wins" in printed and "auto would pick 256" in printed and "gpu-8gb" in printed


def test_buffer_capacity_is_capped_to_the_host_ram_and_says_why():
    small_host = gpu("NVIDIA GeForce RTX 4060 Laptop GPU", 8.0, (8, 9), host_gib=8.0)  # 6 GiB available
    choice = choose_profile(small_host, "sac", {}, IQUITOS)
    capacity = choice.value("model.buffer.capacity")
    assert 500_000 < capacity < 1_000_000
    assert capacity * IQUITOS.transition_bytes <= 0.5 * small_host.host_available_bytes
    why = next(s for s in choice.settings if s.key == "model.buffer.capacity").why
    assert "would not fit" in why


def test_settings_that_cannot_fit_in_free_vram_are_refused_with_the_numbers():
    busy = gpu("NVIDIA GeForce RTX 4060 Laptop GPU", 8.0, (8, 9), free_gib=0.3)
    with pytest.raises(InsufficientMemory, match=r"needs about .* GiB .* only 0\.30 GiB is free"):
        choose_profile(busy, "sac", {}, IQUITOS)
    huge = {"model.hidden_sizes": [4096, 4096], "model.batch_size": 32_768}
    with pytest.raises(InsufficientMemory, match="--model.batch_size"):
        choose_profile(RTX_4060_LAPTOP, "sac", huge, IQUITOS)
    assert choose_profile(H100, "sac", huge, IQUITOS).value("model.batch_size") == 32_768  # fits there


def test_host_ram_too_small_for_a_useful_buffer_is_refused():
    with pytest.raises(InsufficientMemory, match="host RAM too small"):
        choose_profile(cpu(available_gib=0.05), "sac", {}, IQUITOS)


def test_forced_class_applies_that_class_and_notes_it():
    choice = choose_profile(H100, "sac", {}, IQUITOS, profile_class="gpu-8gb")
    assert choice.value("model.batch_size") == 256
    assert any("forced" in note and "gpu-datacenter" in note for note in choice.notes)


def test_values_restored_from_a_checkpoint_are_kept():
    restored = {"model.hidden_sizes": [64, 64]}
    choice = choose_profile(RTX_4080, "sac", restored, IQUITOS, checkpoint_keys=frozenset(restored))
    setting = next(s for s in choice.settings if s.key == "model.hidden_sizes")
    assert setting.value == [64, 64] and setting.source == "checkpoint"


def test_on_policy_agents_get_their_own_batch_keys():
    ppo = choose_profile(RTX_4060_LAPTOP, "ppo", {}, IQUITOS)
    assert ppo.value("model.minibatch_size") == 256
    assert {s.key for s in ppo.settings}.isdisjoint({"model.batch_size", "model.buffer.capacity"})
    a2c = choose_profile(H100, "a2c", {}, IQUITOS)
    assert {s.key for s in a2c.settings}.isdisjoint({"model.batch_size", "model.minibatch_size"})
    assert a2c.buffer_bytes == 0
    with pytest.raises(ValueError, match="auto profiles know"):
        choose_profile(H100, "dqn", {}, IQUITOS)


# The card's site on the twin: its four training years' tables (rows = 4 x 8,760) and a compact observation.
CARD_TWIN = Workload(
    observation_dim=60, action_dim=4, transition_bytes=600, frames_per_batch=8192,
    twin_table_bytes=4 * 8760 * 4_000, twin_bytes_per_env=70_000,
)  # fmt: skip


@pytest.mark.parametrize(("algorithm", "envs", "frames"), [("ppo", 256, 8192), ("a2c", 256, 4096)])
def test_on_a_gpu_the_twin_steps_on_the_device_with_the_gpu_batch_and_on_a_cpu_with_the_cards(
    algorithm: str, envs: int, frames: int
) -> None:
    on_gpu = choose_profile(RTX_4060_LAPTOP, algorithm, {}, CARD_TWIN)
    assert on_gpu.value("model.env.backend.device") == "training"
    assert (on_gpu.value("model.env.backend.num_envs"), on_gpu.value("model.rollout.frames_per_batch")) == (
        envs,
        frames,
    )
    assert on_gpu.device_memory.env == CARD_TWIN.twin_table_bytes + envs * 70_000 + frames * 600  # counted
    on_cpu = choose_profile(cpu(), algorithm, {}, CARD_TWIN)
    assert on_cpu.value("model.env.backend.device") == "cpu" and on_cpu.value("model.env.backend.num_envs") == 64
    assert on_cpu.device_memory.env == 0
    if algorithm == "ppo":
        assert on_gpu.value("model.minibatch_size") == on_cpu.value("model.minibatch_size") == 512
    pendulum = choose_profile(RTX_4060_LAPTOP, algorithm, {}, Workload(3, 1, 100, 1000))  # not the twin: no such keys
    assert all(not setting.key.startswith("model.env") for setting in pendulum.settings)


def test_a_twin_whose_tables_do_not_fit_the_gpu_is_refused_at_start_naming_them() -> None:
    huge = Workload(60, 4, 600, 8192, twin_table_bytes=int(9 * GIB), twin_bytes_per_env=70_000)
    with pytest.raises(InsufficientMemory, match=r"twin 9\.\d\d GiB"):
        choose_profile(RTX_4060_LAPTOP, "ppo", {}, huge)
    choose_profile(RTX_4060_LAPTOP, "ppo", {"model.env.backend.device": "cpu"}, huge)  # on the CPU it runs
