"""What counts as written by the user: command-line keys in every spelling, config-file keys, dict values."""

from __future__ import annotations

from pathlib import Path

from iquitos_lightning.profile.explicit_settings import explicit_keys, is_explicit

REPO = Path(__file__).resolve().parents[2]


def test_command_line_keys_count_in_every_spelling():
    keys = explicit_keys(["fit", "--model.init_args.batch_size", "64", "--trainer.precision=bf16-mixed"])
    assert {"model.batch_size", "trainer.precision"} <= keys


def test_a_value_equal_to_the_default_still_counts_as_written():
    keys = explicit_keys(["fit", "--model", "SAC", "--model.batch_size", "256"])  # 256 is SAC's default
    assert is_explicit("model.batch_size", keys)


def test_choosing_the_model_class_sets_no_value_inside_it():
    keys = explicit_keys(["fit", "--model", "SAC", "--print_config", "--model.env.name", "Pendulum-v1"])
    assert not is_explicit("model.batch_size", keys)
    assert is_explicit("model.env.name", keys)


def test_a_dict_value_counts_for_each_key_inside_it_only():
    keys = explicit_keys(["fit", "--model.buffer", "{capacity: 5000}"])
    assert is_explicit("model.buffer.capacity", keys)
    assert not is_explicit("model.buffer.storage", keys)


def test_config_file_keys_count_and_profile_keys_left_out_of_the_auto_configs_do_not():
    auto = explicit_keys(["fit", "--config", str(REPO / "configs" / "sac_auto.yaml")])
    assert is_explicit("model.env.site", auto) and is_explicit("trainer.accelerator", auto)
    for key in ("model.hidden_sizes", "trainer.precision", "model.buffer.capacity"):
        assert not is_explicit(key, auto), key
    assert is_explicit("model.batch_size", auto)  # a learning setting of the card's SAC, written as measured
    written = explicit_keys(["fit", "-c", str(REPO / "configs" / "sac_rtx4060.yaml")])
    assert is_explicit("model.batch_size", written) and is_explicit("model.buffer.capacity", written)


def test_a_whole_group_set_to_null_makes_its_keys_explicit():
    assert is_explicit("model.buffer.capacity", explicit_keys(["--model.buffer", "null"]))
