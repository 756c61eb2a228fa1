"""Where a batch of independent jobs runs: this machine's cores (``LocalBackend``, each
job pinned to its own slice) or a Ray cluster (``RayBackend``). Sweeps and benchmarks hand
them a task and its jobs; both backends return the results in job order."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, TypeVar

if TYPE_CHECKING:
    import ctypes

T = TypeVar("T")

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class Backend(Protocol):
    """Where a batch of jobs runs (``LocalBackend``, ``RayBackend``): ``task(*job,
    cores=...)`` for every job, results in ``jobs`` order, each seen by ``report`` as it
    finishes."""

    def map(
        self, task: Callable[..., T], jobs: Sequence[tuple[Any, ...]], report: Callable[[T], None]
    ) -> list[T]: ...


def job_process_setup(cores: Sequence[int] | None) -> Callable[[], None]:
    """What a job's child process runs between fork and exec: pinned to ``cores`` (if
    given) and, on Linux, sent SIGINT, the Ctrl-C every rlfw command stops on cleanly, when
    the thread that started it ends. A sweep or benchmark killed in any way (SIGTERM,
    SIGKILL, its terminal closed) so leaves no run behind, orphaned on its cores. SIGINT is
    set back to its default first: a parent started in the background (``cmd &``) ignores
    it, and an exec'd Python keeps an ignored SIGINT ignored."""
    parent = os.getpid()
    libc = _libc()

    def setup() -> None:
        if cores and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cores)
        if libc is None:
            return
        # ctypes, not signal.signal: this may run in a thread other than Python's main one
        libc.signal(signal.SIGINT, signal.SIG_DFL)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: nobody will signal us
            os._exit(130)

    return setup


def _libc() -> ctypes.CDLL | None:
    """The C library, for prctl and signal (None off Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


class LocalBackend:
    """Up to ``max_parallel`` jobs at once on this machine, each pinned to its own slice of
    the usable cores (so their affinity plans see only that slice)."""

    def __init__(self, max_parallel: int):
        if max_parallel < 1:
            raise ValueError(f"max_parallel must be >= 1, got {max_parallel}")
        self.max_parallel = max_parallel

    def _core_slices(self) -> list[list[int] | None]:
        try:
            usable = sorted(os.sched_getaffinity(0))
        except AttributeError:
            return [None] * self.max_parallel
        if self.max_parallel > len(usable):
            return [None] * self.max_parallel  # more runs than cores: let the OS share them
        n = self.max_parallel
        return [usable[i * len(usable) // n : (i + 1) * len(usable) // n] for i in range(n)]

    def map(
        self, task: Callable[..., T], jobs: Sequence[tuple[Any, ...]], report: Callable[[T], None]
    ) -> list[T]:
        """``task(*job, cores=...)`` for every job, results in ``jobs`` order; ``report``
        sees each result as it finishes (in the calling thread)."""
        free = self._core_slices()
        results: dict[int, T] = {}
        with ThreadPoolExecutor(self.max_parallel) as pool:
            pending: dict[Future[T], tuple[int, list[int] | None]] = {}
            queue = list(enumerate(jobs))
            while queue or pending:
                while queue and free:
                    index, job = queue.pop(0)
                    cores = free.pop(0)
                    pending[pool.submit(task, *job, cores=cores)] = (index, cores)
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    index, cores = pending.pop(fut)
                    free.append(cores)
                    results[index] = fut.result()
                    report(results[index])
        return [results[i] for i in range(len(jobs))]


class RayBackend:
    """Each job a Ray task (``num_cpus=cpus_per_run``) on an existing cluster
    (``address``: 'auto', 'ray://host:10001', or None for a local instance). Every node
    needs rlfw installed and the run folders on a filesystem the driver reads too (the
    tasks write them; results come back to the driver either way)."""

    def __init__(
        self, address: str | None, cpus_per_run: float = 1.0, max_parallel: int | None = None
    ):
        if importlib.util.find_spec("ray") is None:
            raise ValueError("--backend ray needs Ray: pip install -e '.[ray]'")
        self.address, self.cpus_per_run, self.max_parallel = address, cpus_per_run, max_parallel

    def map(
        self, task: Callable[..., T], jobs: Sequence[tuple[Any, ...]], report: Callable[[T], None]
    ) -> list[T]:
        """``task(*job, cores=None)`` for every job as Ray tasks, results in ``jobs``
        order; ``report`` sees each result as it finishes."""
        import ray

        started_here = not ray.is_initialized()
        if started_here:
            kwargs: dict[str, Any] = {"address": self.address} if self.address else {}
            if not self.address and self.max_parallel:
                kwargs["num_cpus"] = int(self.max_parallel * self.cpus_per_run)
            ray.init(include_dashboard=False, log_to_driver=False, **kwargs)
        try:
            remote = ray.remote(num_cpus=self.cpus_per_run, max_retries=0)(_call)
            refs = {remote.remote(task, *job): i for i, job in enumerate(jobs)}
            results: dict[int, T] = {}
            waiting = list(refs)
            while waiting:
                ready, waiting = ray.wait(waiting, num_returns=1)
                index = refs[ready[0]]
                results[index] = ray.get(ready[0])
                report(results[index])
            return [results[i] for i in range(len(jobs))]
        finally:
            if started_here:
                ray.shutdown()


def _call(task: Callable[..., T], *job: Any) -> T:
    # ray.remote takes plain functions only, and tasks are often functools.partial objects
    return task(*job, cores=None)
