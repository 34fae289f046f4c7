"""Suite-wide settings: W&B never reaches the network from a test.

Tests run with ``WANDB_MODE=disabled`` (no W&B process per run, faster); the tests of tracking itself
set ``offline`` with ``monkeypatch``. Online mode without a network would hang ~90 s (measured with wandb 0.31).
"""

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from hermetic import changed_files, listing

os.environ["WANDB_MODE"] = "disabled"
os.environ["WANDB_SILENT"] = "true"

# Tests name configs/ and data/ relative to the repository, as a user's commands do: run them from any folder.
REPO = Path(__file__).resolve().parents[1]
os.chdir(REPO)

# The suite runs in parallel (pyproject: ``-n auto --dist worksteal``; ``auto`` is one worker more than the cores:
# pytest_xdist_auto_num_workers below). Each worker gets its share of the cores for torch's intra-op threads (at least
# one): never more threads than cores per worker.
# Subprocesses (the CLI tests, collector workers) inherit the share through OMP_NUM_THREADS: two processes each
# spinning two OpenMP threads on two cores ran SAC updates ~4x slower than one thread each (measured here).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _THREADS = max(1, (os.cpu_count() or 1) // _WORKERS)
    torch.set_num_threads(_THREADS)
    os.environ["OMP_NUM_THREADS"] = str(_THREADS)
# torch.compile's Inductor compiles its kernels in a pool of worker processes, one per core, each importing torch,
# unless told otherwise: on the 2-core machine beside three test workers that pool is only more processes competing
# for the same cores. One compile thread (in the compiling process; set before Lightning imports
# torch._inductor.config): the compiled-update and compiled-twin tests, with Inductor's cache cold as on CI,
# 74.6 -> 61.0 s of CPU (measured here). They still compile every kernel they compiled before.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")


USER_FILES_BEFORE = pytest.StashKey[dict[str, tuple[int, int]]]()


def pytest_sessionstart(session: pytest.Session) -> None:
    """The controlling process lists the user's folders (tests/hermetic.py) before any test runs."""
    if not hasattr(session.config, "workerinput"):
        session.config.stash[USER_FILES_BEFORE] = listing(REPO)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """...and fails the session, naming the files, when a test made, removed or rewrote one of them."""
    before = session.config.stash.get(USER_FILES_BEFORE, None)
    if before is None or hasattr(session.config, "workerinput"):
        return
    changed = changed_files(before, listing(REPO))
    if changed:
        shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
        sys.stderr.write(f"\nthe suite wrote the checkout's runs/ or results/ (tests must use tmp_path): {shown}\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the cores. Why: many tests wait on a child process (a ``fit`` or a
    collection worker starting, a signal's effect polled for) while their worker's core idles; a third worker on the
    2-core machine fills those waits: the whole suite on a fresh clone 747 s -> 699 s, CPU use 184 % -> 192 %
    (2026-11-28, docs/experiments.md, "suite time, measured and cut")."""
    return (os.cpu_count() or 1) + 1


def torch_globals() -> dict[str, object]:
    """torch's process-wide settings a test or the code under test may change (threads, TF32, determinism, ...)."""
    return {
        "threads": torch.get_num_threads(),
        "default_dtype": torch.get_default_dtype(),
        "grad_enabled": torch.is_grad_enabled(),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "cudnn_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "deterministic": (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        ),
    }


def set_torch_globals(settings: dict[str, object]) -> None:
    torch.set_num_threads(settings["threads"])
    torch.set_default_dtype(settings["default_dtype"])
    torch.set_grad_enabled(settings["grad_enabled"])
    torch.set_float32_matmul_precision(settings["matmul_precision"])
    torch.backends.cudnn.allow_tf32 = settings["cudnn_tf32"]
    torch.backends.cudnn.benchmark = settings["cudnn_benchmark"]
    enabled, warn_only = settings["deterministic"]
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


@pytest.fixture
def read_torch_globals() -> Callable[[], dict[str, object]]:
    """:func:`torch_globals`, for the test that checks the fixture below."""
    return torch_globals


@pytest.fixture(autouse=True)
def _torch_globals_restored() -> Iterator[None]:
    """A test that pins torch to one thread (tiny networks), turns TF32 on (``apply_tf32``), asks Lightning for
    deterministic algorithms or cudnn's benchmark, must not leave the rest of the session so: each is put back."""
    settings = torch_globals()
    yield
    set_torch_globals(settings)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """A test marked ``cpu_only`` checks what a machine without CUDA does. On a GPU machine it is not skipped: it
    runs in a child pytest that cannot see the GPU (``CUDA_VISIBLE_DEVICES=""``), and passes only if it passes
    there. Elsewhere it runs as usual."""
    if pyfuncitem.get_closest_marker("cpu_only") is None or not torch.cuda.is_available():
        return None
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_XDIST")}
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-rs", pyfuncitem.nodeid],
        cwd=REPO,
        env={**environment, "CUDA_VISIBLE_DEVICES": ""},
        capture_output=True,
        text=True,
    )
    if child.returncode != 0 or re.search(r"\b1 passed\b", child.stdout) is None:  # a skip there is no pass
        pytest.fail(f"with CUDA hidden it did not pass:\n{child.stdout[-4000:]}\n{child.stderr[-2000:]}", pytrace=False)
    return True


# The twin fit both tests/training/test_final_test.py and tests/experiments/test_test_years.py read: the smoke
# profile on the tiny site's twin (fleet layout, tariff), 336 frames evaluated every 56 on the evaluation year and on
# selection year 8, ending with the test of best.ckpt on the twin. The tests only read it, so it is trained once
# (~30 s of CPU).
SELECTING_RUN_ARGUMENTS = [
    "--tracking.wandb=false",
    "--report.plots=false",  # no test reads its images
    "--model.init_args.rollout.frame_budget=336",
    "--model.init_args.rollout.eval_every_frames=56",
    "--model.init_args.env.backend.train=twin",
    "--model.init_args.env.backend.num_envs=4",
    "--model.init_args.env.layout=fleet",
    "--model.init_args.env.objective=tariff",
    "--model.init_args.env.backend.evaluate=twin",
    "--model.init_args.env.validation_site_seed=8",
    "--final_test.backend=twin",
    "--final_test.policy=best",
]


@pytest.fixture(scope="session")
def selecting_tiny_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The run folder of the fit above, laid out as ``compare`` lays out a run (``<root>/tiny/tariff/sac-seed0``).

    Trained once per pytest session: under xdist the workers share the folder beside their own temporary folders
    (this session's), the first to ask trains it under a file lock and the others wait for it and read it."""
    # lazy: the fit's imports only where a test asks for the run
    from filelock import FileLock

    from iquitos_lightning.cli import run_lightning_cli

    base = tmp_path_factory.getbasetemp()
    root = (base.parent if worker_id != "master" else base) / "selecting-tiny-run"
    run = root / "tiny" / "tariff" / "sac-seed0"
    with FileLock(str(root) + ".lock"):
        if not (root / "trained").exists():
            code = run_lightning_cli(["fit", "--config", str(REPO / "configs" / "smoke.yaml"),
                                      f"--trainer.logger.init_args.save_dir={run.parent}",
                                      f"--trainer.logger.init_args.name={run.name}",
                                      f"--checkpoint.dirpath={run / 'checkpoints'}",
                                      *SELECTING_RUN_ARGUMENTS])  # fmt: skip
            assert code == 0, "the shared selecting run did not train"
            (root / "trained").touch()
    return run
