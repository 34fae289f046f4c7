"""``compare`` and ``tune`` refuse what cannot work with one ``error:`` line and status 2, before any run starts;
the search-space YAML is checked against the agent's real options; the local launcher never loads Ray."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from iquitos_lightning.__main__ import main
from iquitos_lightning.experiments.launchers import LauncherOptions, LocalLauncher, Resources
from iquitos_lightning.experiments.search_space import load_search_space
from iquitos_lightning.experiments.tune import TuneError, _check_same_settings

REPO = Path(__file__).resolve().parents[2]
TINY = str(REPO / "configs" / "site" / "tiny.yaml")
SEARCH = REPO / "configs" / "search" / "sac_residual_tariff.yaml"


def _closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


COMPARE = ["compare", "--site", TINY, "--agents", "sac", "--seeds", "1", "--frames", "56"]


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--launcher", "ray", "--address", f"127.0.0.1:{_closed_port()}"], "no Ray head answers there"),
        (["--launcher", "ray", "--address", "headnode"], "is not HOST:PORT"),
        (["--launcher", "ray", "--address", "ray://127.0.0.1:10001"], "ray[client]"),
        (["--address", "127.0.0.1:6379"], "use it with --launcher ray"),
        (["--gpus-per-run", "0.5"], "is for --launcher ray"),
        (["--launcher", "ray", "--cpus-per-run", "0"], "--cpus-per-run must be 1 or more"),
    ],
)
def test_compare_refuses_a_launcher_that_cannot_work_in_one_line(tmp_path, capsys, arguments, named):
    code = main([*COMPARE, "--results", str(tmp_path / "results"), "--runs", str(tmp_path / "runs"), *arguments])
    error = capsys.readouterr().err
    assert code == 2
    assert error.startswith("error: ") and named in error and error.count("\n") == 1, error
    assert not (tmp_path / "results").exists()  # refused before the references were made


RESIDUAL_TARIFF = "configs/experiments/tariff/sac_residual_tariff_twin_cpu.yaml"


def _space(tmp_path: Path, params: str, profile: str = RESIDUAL_TARIFF) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(f"profile: {profile}\nparams:\n{params}")
    return path


@pytest.mark.parametrize(
    ("params", "named"),
    [
        (
            "  model.init_args.actor_lrr: {type: float, low: 1.0e-5, high: 1.0e-3}\n",
            "did you mean 'model.init_args.actor_lr'",
        ),
        ("  model.init_args.rollout.frames_per_bach: {type: int, low: 8, high: 64}\n", "rollout.frames_per_batch"),
        ("  trainer.max_epochs: {type: int, low: 1, high: 3}\n", "only model options are searched"),
        ("  model.init_args.actor_lr: {type: float, low: 1.0e-3, high: 1.0e-5}\n", "must be below high"),
        ("  model.init_args.actor_lr: {type: real, low: 1.0e-5, high: 1.0e-3}\n", "give 'type:' one of"),
        ("  model.init_args.hidden_sizes: {type: categorical, values: [1]}\n", "a categorical needs choices"),
    ],
)
def test_tune_refuses_a_search_space_naming_an_unknown_option_or_a_bad_range(tmp_path, capsys, params, named):
    search = _space(tmp_path, params)
    code = main(["tune", "--search", str(search), "--site", TINY, "--frames", "56", "--runs", str(tmp_path / "runs")])
    error = capsys.readouterr().err
    assert code == 2
    assert error.startswith("error: ") and named in error and error.count("\n") == 1, error
    assert not (tmp_path / "runs").exists()


def test_the_provided_search_space_names_real_options_of_the_residual_sac():
    space = load_search_space(SEARCH)
    names = {param.name for param in space.params}
    assert {"actor_lr", "critic_lr", "residual_penalty", "initial_scale", "actor_delay_frames"} <= names
    assert {"target_entropy", "hidden_sizes", "updates_per_frame"} <= names
    assert space.profile == Path(RESIDUAL_TARIFF)
    hidden = next(param for param in space.params if param.name == "hidden_sizes")
    assert hidden.override("[64, 64]") == "--model.init_args.hidden_sizes=[64, 64]"
    assert hidden.yaml_value("[64, 64]") == [64, 64]


def test_a_search_space_naming_a_profile_by_its_path_before_the_experiments_folder_still_finds_it(tmp_path):
    """``configs/<name>.yaml`` written before the experiments' profiles moved to ``configs/experiments/<objective>/``
    is the moved file, and a study made with the old path resumes with the new one (same file name)."""
    params = "  model.init_args.actor_lr: {type: float, low: 1.0e-5, high: 1.0e-3}\n"
    space = load_search_space(_space(tmp_path, params, profile="configs/sac_residual_tariff_twin_cpu.yaml"))
    assert space.profile == Path(RESIDUAL_TARIFF)

    class Study:  # the two members of an Optuna study that the check uses
        def __init__(self) -> None:
            self.user_attrs: dict[str, object] = {}

        def set_user_attr(self, key: str, value: object) -> None:
            self.user_attrs[key] = value

    study = Study()
    old = {"search": {**space.as_record(), "profile": "configs/sac_residual_tariff_twin_cpu.yaml"}, "frames": 8}
    _check_same_settings(study, old, "old")  # first sitting: recorded
    _check_same_settings(study, {"search": space.as_record(), "frames": 8}, "old")  # moved profile: same study
    with pytest.raises(TuneError, match="made with other search"):
        _check_same_settings(
            study, {"search": {**space.as_record(), "profile": "configs/other.yaml"}, "frames": 8}, "x"
        )


def test_the_local_launcher_hands_back_every_result_and_never_imports_ray():
    """In a fresh interpreter: the local launcher maps a function over arguments, 2 at a time; no Ray runtime is
    started (the main job and `compare` without --launcher ray need no Ray process) and Optuna is not loaded."""
    script = (
        "import sys\n"
        "from iquitos_lightning.experiments.launchers import LauncherOptions\n"
        "from iquitos_lightning.experiments import compare, tune\n"
        "with LauncherOptions('local', 2).make() as pool:\n"
        "    print(sorted(pool.map_unordered(abs, [-3, 1, -2])))\n"
        "ray = sys.modules.get('ray')  # TorchRL's torchrl.data imports it when installed: a module, no process\n"
        "print(ray is not None and ray.is_initialized(), 'optuna' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == ["[(0, 3), (1, 1), (2, 2)]", "False False"]
    assert isinstance(LauncherOptions("local", 1).make(), LocalLauncher)
    assert LauncherOptions("local", 1, cpus=1).check() == Resources(1, 0.0)
