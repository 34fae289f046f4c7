"""Where the runs of ``compare`` and ``tune`` execute: on this machine (``local``) or as Ray tasks (``ray``).

Why one small interface: a run is the same ``fit`` subprocess whichever launcher starts it, so its KPI row,
its checkpoints and the table made from them cannot depend on where it ran. A launcher only decides *where*
the function that starts the subprocess is called: in a thread of this process (``local``, the default: no
Ray process, no Ray import) or in a Ray task on any node of a cluster (``ray``), with the run's resources
declared (CPUs, a GPU fraction) so Ray packs runs onto nodes the way ``--jobs`` packs them here.

What a Ray run needs from the cluster (docs/scale-out.md): the project installed at the same path on every
node (the task changes into the driver's working directory before it starts the run), and the runs folder
(checkpoints, logs, ``kpis.json``) and any study journal on storage every node sees.
"""

from __future__ import annotations

import importlib.util
import os
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from iquitos_lightning.errors import ConfigError

A = TypeVar("A")
R = TypeVar("R")
LAUNCHERS = ("local", "ray")
# Environment a Ray task gets from the driver: a worker node's processes were started by `ray start`, not by this
# command, so W&B's mode and the project's own switches would otherwise be whatever that node had.
PASSED_PREFIXES = ("WANDB_", "IQUITOS_")
CONNECT_TIMEOUT_S = 5.0


class LauncherError(ConfigError):
    """A launcher that cannot start: Ray missing, an address nobody answers on, resources that cannot be met."""


@dataclass(frozen=True)
class Resources:
    """What one run holds while it trains: CPU cores (also its torch threads) and a share of a GPU."""

    cpus: int = 1
    gpus: float = 0.0

    def __post_init__(self) -> None:
        if self.cpus < 1:
            raise LauncherError(f"--cpus-per-run must be 1 or more, got {self.cpus}")
        if self.gpus < 0 or (self.gpus > 1 and self.gpus != int(self.gpus)):
            raise LauncherError(f"--gpus-per-run must be a fraction in [0, 1] or a whole number, got {self.gpus}")


class Launcher(ABC, Generic[A, R]):
    """Runs ``function(argument)`` somewhere, at most ``jobs`` at once, and hands back results as they finish."""

    def __init__(self, jobs: int, resources: Resources) -> None:
        if jobs < 1:
            raise LauncherError(f"--jobs must be 1 or more, got {jobs}")
        self.jobs = jobs
        self.resources = resources

    @abstractmethod
    def submit(self, function: Callable[[A], R], argument: A) -> Any:
        """Start one call; returns its handle for :meth:`wait_any`."""

    @abstractmethod
    def wait_any(self, pending: Sequence[Any]) -> tuple[list[tuple[Any, R]], list[Any]]:
        """Block until at least one handle is done: ``([(handle, result), ...], still pending)``."""

    def close(self) -> None:
        """Release what the launcher holds (threads, the Ray connection)."""

    def map_unordered(self, function: Callable[[A], R], arguments: Sequence[A]) -> Iterator[tuple[int, R]]:
        """``(index, function(arguments[index]))`` as each call finishes, never more than ``jobs`` in flight."""
        index_of: dict[Any, int] = {}
        pending: list[Any] = []
        queue = list(enumerate(arguments))
        while queue or pending:
            while queue and len(pending) < self.jobs:
                index, argument = queue.pop(0)
                handle = self.submit(function, argument)
                index_of[id(handle)] = index
                pending.append(handle)
            done, pending = self.wait_any(pending)
            for handle, result in done:
                yield index_of.pop(id(handle)), result

    def __enter__(self) -> Launcher[A, R]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class LocalLauncher(Launcher[A, R]):
    """Threads of this process; each run is a subprocess, so a thread only waits for it."""

    def __init__(self, jobs: int, resources: Resources) -> None:
        super().__init__(jobs, resources)
        self._pool = ThreadPoolExecutor(jobs)

    def submit(self, function: Callable[[A], R], argument: A) -> Future[R]:
        return self._pool.submit(function, argument)

    def wait_any(self, pending: Sequence[Future[R]]) -> tuple[list[tuple[Future[R], R]], list[Future[R]]]:
        done, still = wait(pending, return_when=FIRST_COMPLETED)
        finished = [future for future in pending if future in done]  # in submission order: reproducible logs
        return [(future, future.result()) for future in finished], [future for future in pending if future in still]

    def close(self) -> None:
        self._pool.shutdown(wait=True)


class RayLauncher(Launcher[A, R]):
    """Ray tasks on the cluster at ``address`` (``None``: a Ray instance started for this command on this machine).

    Each call is a task with ``num_cpus``/``num_gpus`` of :class:`Resources`; it changes into this process's
    working directory first, so relative paths (configs, ``runs/``, ``data/``) mean what they mean here.
    """

    def __init__(self, jobs: int, resources: Resources, address: str | None) -> None:
        super().__init__(jobs, resources)
        import ray  # lazy: Ray is joined for --launcher ray only; the main job and the local launcher never load it

        self._ray = ray
        environment = {key: value for key, value in os.environ.items() if key.startswith(PASSED_PREFIXES)}
        try:
            ray.init(
                address=address,
                log_to_driver=False,
                configure_logging=False,
                include_dashboard=False if address is None else None,
                runtime_env={"env_vars": environment} if environment else None,
            )
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise LauncherError(f"--address {address}: no Ray cluster could be joined ({first_line(error)})") from error
        available = ray.cluster_resources()
        if resources.cpus > available.get("CPU", 0) or resources.gpus > available.get("GPU", 0):
            self.close()
            raise LauncherError(
                f"a run asks for {resources.cpus} CPU(s) and {resources.gpus:g} GPU(s) but the Ray cluster has "
                f"{available.get('CPU', 0):g} CPU(s) and {available.get('GPU', 0):g} GPU(s) in all: lower "
                "--cpus-per-run / --gpus-per-run or add nodes"
            )
        self._task = ray.remote(_call_in_directory).options(
            num_cpus=resources.cpus, num_gpus=resources.gpus, max_retries=0
        )
        self._workdir = os.getcwd()

    def submit(self, function: Callable[[A], R], argument: A) -> Any:
        return self._task.remote(self._workdir, function, argument)

    def wait_any(self, pending: Sequence[Any]) -> tuple[list[tuple[Any, R]], list[Any]]:
        done, still = self._ray.wait(list(pending), num_returns=1)
        return [(handle, self._ray.get(handle)) for handle in done], list(still)

    def close(self) -> None:
        self._ray.shutdown()


def _call_in_directory(workdir: str, function: Callable[[A], R], argument: A) -> R:
    """The body of a Ray task: run ``function(argument)`` from the driver's working directory (same path per node)."""
    if not os.path.isdir(workdir):
        raise LauncherError(
            f"the Ray node {socket.gethostname()} has no folder {workdir}: install the project at the same path on "
            "every node (docs/scale-out.md)"
        )
    os.chdir(workdir)
    return function(argument)


def check_address(address: str | None) -> None:
    """Refuse at once an address nobody listens on (Ray itself retries for a minute before it gives up).

    ``None`` starts a Ray instance for this command; ``auto`` is Ray's own search for a cluster started on this
    machine; anything else must be ``HOST:PORT`` of a Ray head's GCS (``ray start --head --port PORT``).
    """
    if address is None or address == "auto":
        return
    if address.startswith("ray://"):
        raise LauncherError(
            f"--address {address}: Ray Client addresses (ray://) need the ray[client] extra, which is not installed; "
            "run the command on a node of the cluster with --address HEAD_HOST:6379"
        )
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise LauncherError(f"--address {address!r} is not HOST:PORT (e.g. 127.0.0.1:6379) or 'auto'")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as error:
        raise LauncherError(
            f"--address {address}: no Ray head answers there ({error.strerror or error}); start one with "
            f"`ray start --head --port {port}` or check the address"
        ) from error


def first_line(error: BaseException) -> str:
    """The first line of a library's message (Ray's connection errors run to a page)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


@dataclass(frozen=True)
class LauncherOptions:
    """``--launcher``, ``--address``, ``--jobs``, ``--cpus-per-run``, ``--gpus-per-run`` as one value.

    ``cpus`` unset: an equal share of this machine's cores per run (what ``--jobs`` always meant here).
    """

    kind: str = "local"
    jobs: int = 1
    cpus: int | None = None
    gpus: float = 0.0
    address: str | None = None

    def check(self) -> Resources:
        """Refuse what cannot work before any time is spent (the references, a trial): an unknown launcher, an
        address without Ray, an address nobody answers on, impossible resources. Returns each run's resources."""
        if self.kind not in LAUNCHERS:
            raise LauncherError(f"--launcher {self.kind!r}: choose from {', '.join(LAUNCHERS)}")
        if self.address is not None and self.kind != "ray":
            raise LauncherError("--address names a Ray cluster: use it with --launcher ray")
        share = max(1, (os.cpu_count() or 1) // max(self.jobs, 1))
        resources = Resources(share if self.cpus is None else self.cpus, self.gpus)
        if self.kind == "local" and resources.gpus:
            raise LauncherError("--gpus-per-run is for --launcher ray (a local run uses its profile's device)")
        if self.kind == "ray":
            if importlib.util.find_spec("ray") is None:
                raise LauncherError("--launcher ray: Ray is not installed in this environment; run scripts/install.sh")
            check_address(self.address)
        return resources

    def make(self) -> Launcher[Any, Any]:
        """The launcher these options name (Ray is imported and joined only for ``ray``)."""
        resources = self.check()
        if self.kind == "local":
            return LocalLauncher(self.jobs, resources)
        return RayLauncher(self.jobs, resources, self.address)
