"""Process plumbing shared by the parallel samplers: start, command, watch, stop.

Each worker runs ``serve(conn, handler)``: it waits on its pipe for ``(command, payload)``
and answers ``("ok", result)`` or ``("error", traceback)``; a free-running process (the async
runner's sampler process) may also send messages of its own kind between answers. The
parent never waits without a timeout: while blocked it keeps checking that every process is
alive, so one that raises or is killed surfaces as ``WorkerError`` within about ``POLL_S``
seconds. Every sampler process in rlfw is started, watched and stopped by ``WorkerPool``.
"""

from __future__ import annotations

import multiprocessing as mp  # start methods, process types
import os
import signal
import traceback
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, cast

import torch
import torch.multiprocessing as tmp  # its contexts share tensors by handle

from rlfw.utils.checks import check_positive

if TYPE_CHECKING:
    from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext
    from multiprocessing.synchronize import Semaphore
    from typing import TypeAlias

    # What a start method's name gets (typeshed's BaseContext declares no Process).
    ProcessContext: TypeAlias = ForkContext | ForkServerContext | SpawnContext

POLL_S = 0.2  # liveness check period while waiting on workers
JOIN_S = 3.0  # grace period for workers to exit on close before they are killed
CLOSED = "closed"  # what a handler returns when it saw 'close' itself: exit, no answer
# Workers fork from a server that imported torch once: a spawned interpreter spends ~2 s of
# CPU importing it per worker. Spawn where the platform has no forkserver.
DEFAULT_START_METHOD = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
# What that server imports before forking (never '__main__': an unguarded user script would
# run in the server itself; each worker imports the main module as under spawn).
FORKSERVER_PRELOAD = ("rlfw.samplers",)
# A worker's command handler: (command, payload) -> the answer sent back.
Handler = Callable[[str, Any], Any]


class WorkerError(RuntimeError):
    """A sampler worker raised (the message carries its traceback) or died."""


def worker_setup(cpu: int | None) -> None:
    """Run first in every worker: the parent decides about Ctrl-C, one torch thread per
    process (B/N envs each; more threads only contend), optional pinning to one core."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    if cpu is not None:
        import psutil

        psutil.Process().cpu_affinity([cpu])


def process_context(start_method: str) -> ProcessContext:
    """torch.multiprocessing's context for ``start_method`` (checked); a forkserver gets
    rlfw's samplers preloaded."""
    if start_method not in mp.get_all_start_methods():
        raise ValueError(
            f"start method {start_method!r} unknown; choose from {mp.get_all_start_methods()}"
        )
    ctx = tmp.get_context(start_method)
    if start_method == "forkserver":
        ctx.set_forkserver_preload(list(FORKSERVER_PRELOAD))
    return cast("ProcessContext", ctx)


def master_gone() -> bool:
    """True in a worker whose starting process has exited. Not ``os.getppid()``: under
    forkserver the parent is the server."""
    parent = mp.parent_process()
    return parent is not None and not parent.is_alive()


def wait_for_master(semaphore: Semaphore, conn: Connection) -> bool:
    """A worker's wait, inside a command, for the master's signal: True once signalled;
    False, within ``POLL_S``, when the master sent a message instead (mid-command it can
    only be 'close', after a failure elsewhere: the handler then returns ``CLOSED`` rather
    than sit out the close's grace period); exits quietly when the master is gone (so a
    worker never lingers as an orphan)."""
    while not semaphore.acquire(timeout=POLL_S):
        if conn.poll():
            return False
        if master_gone():
            raise SystemExit(0)
    return True


def _nothing() -> None:
    pass


def serve(
    conn: Connection,
    make_handler: Callable[[], tuple[Handler, Callable[[], None]]],
) -> None:
    """The worker's main: build the handler (envs, agent...), then answer commands until
    'close' or until the parent goes away. A failure while building or handling is sent to
    the parent as a traceback, after which the worker exits."""
    cleanup: Callable[[], None] = _nothing
    try:
        handler, cleanup = make_handler()
        while True:
            try:
                command, payload = conn.recv()
            except (EOFError, OSError):  # parent gone: nothing left to serve
                return
            if command == "close":
                conn.send(("ok", None))
                return
            if command == "ping":  # startup barrier: the handler (envs, reset) is built
                conn.send(("ok", None))
                continue
            result = handler(command, payload)
            if result is CLOSED:
                return
            conn.send(("ok", result))
    except BaseException:
        try:
            name = process_label(mp.current_process().name)
            conn.send(
                (
                    "error",
                    f"{name} (pid {os.getpid()}) raised an exception:\n{traceback.format_exc()}",
                )
            )
        except (OSError, ValueError):
            pass
    finally:
        cleanup()


def process_name(label: str) -> str:
    """A process's name from its label: 'sampler worker 1' -> 'rlfw-sampler-worker-1'."""
    return "rlfw-" + label.replace(" ", "-")


def process_label(name: str) -> str:
    """The label back from a process's name (as errors name the process)."""
    return name.removeprefix("rlfw-").replace("-", " ")


def describe_exit(code: int | None) -> str:
    """How a process ended, from its exit code: 'killed by signal 9' or 'exit code 1'."""
    return f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"


def split_slots(batch_B: int, n_workers: int, unit: int = 1) -> list[range]:
    """Contiguous slot ranges of whole envs of ``unit`` slots each (a many-agent env's
    agents), the envs per range differing by at most one."""
    check_positive(n_workers=n_workers)
    if batch_B % unit:
        raise ValueError(
            f"batch_B={batch_B} is not a whole number of envs of {unit} agents each: use a "
            f"multiple of {unit}"
        )
    n_envs = batch_B // unit
    if n_workers > n_envs:
        what = f"the {n_envs} envs of batch_B={batch_B}" if unit > 1 else f"batch_B={batch_B}"
        raise ValueError(
            f"n_workers={n_workers} exceeds {what}: each worker needs at least one env"
        )
    base, extra = divmod(n_envs, n_workers)
    bounds, start = [], 0
    for w in range(n_workers):
        size = (base + (w < extra)) * unit
        bounds.append(range(start, start + size))
        start += size
    return bounds


def usable_cpus() -> list[int]:
    import psutil

    try:
        return sorted(psutil.Process().cpu_affinity())
    except (AttributeError, NotImplementedError):
        return list(range(os.cpu_count() or 1))


def default_workers(batch_B: int) -> int:
    """One worker per usable core, never more than there are envs."""
    return min(len(usable_cpus()), batch_B)


def worker_cpus(n_workers: int, pin: bool | Sequence[int]) -> list[int | None]:
    """The core each worker is pinned to, or None each: ``pin=True`` goes round-robin over
    the usable cores, a list of cores (an affinity plan's) round-robin over those."""
    if pin is False or pin is None:
        return [None] * n_workers
    cpus = usable_cpus() if pin is True else list(pin)
    if not cpus:
        raise ValueError("pin_cpus got an empty list of cores")
    return [cpus[w % len(cpus)] for w in range(n_workers)]


class WorkerPool:
    """``n`` processes each running ``target(conn, *args_i)``; commands go over pipes.

    ``label`` names process i in errors ('sampler worker 1 (pid ...) died'); a pool of
    processes that start children of their own needs ``daemon=False`` (daemons cannot) and
    may need a longer ``grace_s`` to stop them on close."""

    def __init__(
        self,
        target: Callable[..., None],
        args_per_worker: Sequence[tuple[Any, ...]],
        start_method: str = DEFAULT_START_METHOD,
        label: Callable[[int], str] = lambda i: f"sampler worker {i}",
        daemon: bool = True,
        grace_s: float = JOIN_S,
    ):
        self.ctx = process_context(start_method)
        self.conns: list[Connection] = []
        self.procs: list[mp.process.BaseProcess] = []
        self.labels: list[str] = []
        self.grace_s = grace_s
        self.closed = False
        self.starting = True
        try:
            for i, args in enumerate(args_per_worker):
                parent, child = self.ctx.Pipe()
                self.labels.append(label(i))
                proc = self.ctx.Process(
                    target=target,
                    args=(child, *args),
                    daemon=daemon,
                    name=process_name(self.labels[-1]),
                )
                proc.start()
                child.close()
                self.conns.append(parent)
                self.procs.append(proc)
            self.call("ping")  # envs built and reset everywhere; startup errors surface here
            self.starting = False
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return len(self.procs)

    def send(self, command: str, payloads: Sequence[Any] | None = None) -> None:
        """Send every worker a command; a worker that died (whenever: even while the master
        was busy between batches) surfaces as ``WorkerError``, never as a pipe error."""
        self._check_open()  # a closed pool has no pipes left to fail on
        for i in range(len(self.conns)):
            self.send_one(i, command, None if payloads is None else payloads[i])

    def send_one(self, worker: int, command: str, payload: Any = None) -> None:
        """Send one worker a command (same failure reporting as ``send``)."""
        self._check_open()
        try:
            self.conns[worker].send((command, payload))
        except (OSError, ValueError):  # BrokenPipeError and friends: the reader is gone
            self._raise_dead(worker)

    def _check_open(self) -> None:
        if self.closed:
            raise WorkerError(
                "the sampler workers were stopped (after a failure or close()); "
                "close and initialize the sampler again"
            )

    def receive(self, worker: int) -> Any:
        """Block (with liveness checks) for worker ``worker``'s answer."""
        return self.receive_message(worker)[1]

    def receive_message(self, worker: int) -> tuple[str, Any]:
        """Block (with liveness checks) for worker ``worker``'s next message, ``(kind,
        payload)``; an ``error`` message is raised as ``WorkerError`` with its traceback."""
        self._check_open()
        conn = self.conns[worker]
        while not conn.poll(POLL_S):
            self.check_alive()
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            self._raise_dead(worker)
        if kind == "error":
            self.close()
            raise WorkerError(payload)
        return kind, payload

    def wait(self, semaphore: Any) -> None:
        """Acquire a per-step semaphore, checking worker liveness while blocked."""
        try:
            while not semaphore.acquire(timeout=POLL_S):
                self.check_alive()
        except WorkerError:
            del semaphore  # a kept traceback must not keep a named semaphore in /dev/shm
            raise

    def call(self, command: str, payloads: Sequence[Any] | None = None) -> list[Any]:
        self.send(command, payloads)
        return [self.receive(i) for i in range(len(self))]

    def load_states(self, states: Sequence[Any]) -> None:
        """Send each worker its part of a checkpoint (one state per worker)."""
        if len(states) != len(self):
            raise ValueError(
                f"checkpoint has {len(states)} sampler workers, this sampler "
                f"{len(self)}: resume with the same n_workers"
            )
        self.call("load", states)

    def check_alive(self) -> None:
        """Raise ``WorkerError`` if any worker has exited (a worker that raised sends its
        traceback and then exits, so an exit covers both cases)."""
        for i, proc in enumerate(self.procs):
            if proc.exitcode is not None:
                self._raise_dead(i)

    def _raise_dead(self, worker: int) -> None:
        proc, conn, label = self.procs[worker], self.conns[worker], self.labels[worker]
        proc.join(timeout=1.0)
        pid = proc.pid
        report = None
        try:
            while conn.poll():
                status, result = conn.recv()
                if status == "error":
                    report = result
        except (EOFError, OSError):
            pass
        code = proc.exitcode
        del proc, conn
        self.close()
        if report is not None:
            raise WorkerError(report)
        how = describe_exit(code)
        hint = ""
        if self.starting and code == 1:
            hint = (
                "; it failed while starting (see its traceback above). Under the 'spawn' "
                "and 'forkserver' start methods the main script must guard its entry "
                "point with `if __name__ == '__main__':`"
            )
        raise WorkerError(f"{label} (pid {pid}) died: {how}{hint}")

    def close(self) -> None:
        """Idempotent: ask workers to exit, then kill any that did not; close pipes."""
        if self.closed:
            return
        self.closed = True
        for conn, proc in zip(self.conns, self.procs):
            if proc.is_alive():
                try:
                    conn.send(("close", None))
                except (OSError, ValueError):
                    pass
        for proc in self.procs:
            proc.join(timeout=self.grace_s)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=JOIN_S)
        for conn in self.conns:
            conn.close()
        # Process objects keep their args (shared tensors, named semaphores) alive; an
        # exception traceback holding this pool must not keep them from being freed.
        self.procs, self.conns = [], []


def share_memory(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor.share_memory_()``: moves its storage into shared memory; returns it."""
    # torch leaves the method unannotated: typed here, callers stay checked
    move: Callable[[], torch.Tensor] = tensor.share_memory_
    return move()


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run a block with ``n`` torch intra-op threads. Samplers whose env stepping happens in
    other threads or processes sample with one: idle OpenMP threads spin-wait after each op
    and steal the cores the envs need (measured: native Pong 2,030 vs 1,440 steps/s)."""
    before = torch.get_num_threads()
    if before == n:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
