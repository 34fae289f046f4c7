"""``compare`` through a real Ray cluster (``ray start --head`` on the loopback address) gives the same table as
the local launcher for the same seeds.

The cluster is this test's own: started on 127.0.0.1 with 1 CPU (the one run's) in a new session, and stopped at
the end even on failure (SIGTERM to ``ray start --block``, which takes its processes down; SIGKILL to its process
group if that has not happened within 30 s). ``ray stop`` is never used: it kills every Ray process of the user on
the machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from iquitos_lightning.__main__ import main

REPO = Path(__file__).resolve().parents[2]
TINY = str(REPO / "configs" / "site" / "tiny.yaml")
# Ray replaces a loopback node address with the machine's own IP and binds the GCS to every interface; with this
# switch (meant for single-machine use on macOS and Windows) every Ray process binds and talks on 127.0.0.1 only.
# Token authentication off: Ray 2.60 turns it on for `ray start` whenever ~/.ray/auth_token exists (any earlier
# local `ray.init()` writes one), and this throwaway loopback cluster must not depend on that file.
LOOPBACK_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
STARTED = "Ray runtime started"


def _free_loopback_port() -> int:
    """An ephemeral loopback port (outside Ray's worker port range 10002-19999)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def ray_head() -> Iterator[tuple[str, Path]]:
    """``HOST:PORT`` and the session folder of a one-node Ray cluster on 127.0.0.1 with 1 CPU, stopped after the
    test. One CPU: the compare below runs one run of one CPU, and Ray sizes its pool of worker processes by CPUs."""
    port = _free_loopback_port()
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths must fit 107 characters
    log_path = Path(temp_dir) / "ray-start.log"
    command = [
        str(Path(sys.executable).with_name("ray")), "start", "--head", f"--port={port}", "--num-cpus=1",
        "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}", "--block",
    ]  # fmt: skip
    environment = {**os.environ, **LOOPBACK_ONLY}
    with log_path.open("w") as log:
        head = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while STARTED not in log_path.read_text():
            assert head.poll() is None, "ray start failed:\n" + log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, "ray start did not finish in 120 s:\n" + log_path.read_text()[-3000:]
            time.sleep(0.5)
        yield f"127.0.0.1:{port}", Path(temp_dir) / "session_latest"
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        try:
            os.killpg(head.pid, signal.SIGKILL)  # any straggler of the group (raylet workers)
        except ProcessLookupError:
            pass
        shutil.rmtree(temp_dir, ignore_errors=True)


def _compare_arguments(tmp_path: Path, name: str, *launcher: str) -> list[str]:
    """``compare``'s arguments (after ``python -m iquitos_lightning``): one SAC seed of 56 frames under ``name``."""
    return [
        "compare", "--site", TINY, "--agents", "sac", "--seeds", "1",
        "--frames", "56", "--jobs", "1", "--cpus-per-run", "1", "--profile", "per_socket_cpu",
        "--results", str(tmp_path / name / "results"), "--runs", str(tmp_path / name / "runs"),
        "--override", "model.init_args.rollout.frames_per_batch=56",
        "--override", "model.init_args.hidden_sizes=[8,8]",
        "--override", "report.plots=false",
        "--override", "sac:model.init_args.speed.compile=false",
        "--override", "model.init_args.rollout.overlap=false",  # no collection worker: the launcher is what is tested
        *launcher,
    ]  # fmt: skip


@pytest.mark.slow
def test_compare_through_a_ray_cluster_gives_the_local_launchers_table(tmp_path, ray_head, capsys):
    """The Ray driver is a process of its own (``ray.init`` in it, as a user's command); the local ``compare`` runs
    in this process (``main``: its run is a ``fit`` subprocess either way)."""
    address, session = ray_head
    command = [sys.executable, "-m", "iquitos_lightning", *_compare_arguments(tmp_path, "ray", "--launcher", "ray",
                                                                             "--address", address)]  # fmt: skip
    environment = {**os.environ, **LOOPBACK_ONLY}
    on_ray = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=environment)
    assert on_ray.returncode == 0, on_ray.stdout[-3000:] + on_ray.stderr[-3000:]
    assert list((session / "logs").glob("worker-*.out")), "no Ray worker ran a task"  # the runs went through Ray
    references = tmp_path / "ray" / "results" / "tiny" / "baselines.json"
    (tmp_path / "local" / "results" / "tiny").mkdir(parents=True)
    shutil.copy(references, tmp_path / "local" / "results" / "tiny")  # the references are not what is compared
    code = main(_compare_arguments(tmp_path, "local"))
    local = capsys.readouterr()
    assert code == 0, local.out[-3000:] + local.err[-3000:]

    tables = [tmp_path / name / "results" / "tiny" / "comparison_thesis.csv" for name in ("ray", "local")]
    assert tables[0].read_text() == tables[1].read_text()
    assert pd.read_csv(tables[0], index_col=0).loc["sac", "seeds"] == 1
    checkpoint = tmp_path / "ray" / "runs" / "tiny" / "thesis" / "sac-seed0" / "checkpoints" / "last.ckpt"
    assert checkpoint.exists()  # the Ray task wrote its checkpoints to the runs folder the driver named
