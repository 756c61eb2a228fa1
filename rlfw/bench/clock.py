"""A benchmark run's clock: wall-clock seconds, and how much of them the run's threads spent
runnable but waiting for a CPU that another process held.

Seconds compared with a peer mean something only on a quiet machine. A run pinned to its own
core on a quiet machine almost never waits in the run queue; one that shares its core with
another busy process waits about half the time. The wait is read from Linux's per-thread
scheduler statistics (``/proc/self/task/*/schedstat``, its second field), so a report can
tell a quietly timed run from one timed under load after the fact instead of trusting
whoever ran it.
"""

from __future__ import annotations

import glob
import time
from typing import Any

LOADED_WAIT_SHARE = 0.1  # above this, a run's seconds were taken under load


def run_queue_wait_s() -> float | None:
    """Seconds this process's live threads have spent waiting in a run queue (None where
    the kernel does not report it)."""
    total = 0
    paths = glob.glob("/proc/self/task/*/schedstat")
    if not paths:
        return None
    for path in paths:
        try:
            with open(path) as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):  # a thread that ended while we read
            continue
    return total / 1e9


class RunClock:
    """Times a block: ``wall_s``, and ``wait_share``, the run-queue wait per wall second
    (None where unknown). ``with RunClock() as clock: train()``."""

    def __init__(self) -> None:
        self.wall_s = 0.0
        self.wait_share: float | None = None
        self._start = 0.0
        self._wait0: float | None = None

    def __enter__(self) -> RunClock:
        self._wait0 = run_queue_wait_s()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.perf_counter() - self._start
        wait1 = run_queue_wait_s()
        if self._wait0 is not None and wait1 is not None and self.wall_s > 0:
            self.wait_share = max(0.0, wait1 - self._wait0) / self.wall_s


def timed_under_load(result: dict[str, Any]) -> bool | None:
    """Whether a finished run's seconds were taken under load (None: not recorded, as in
    records written before the clock existed)."""
    share = result.get("wait_share")
    return None if share is None else share > LOADED_WAIT_SHARE


def quietly_timed(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The finished runs whose seconds are worth reading: those recorded as timed quietly;
    only where none was, those whose load was not recorded (records older than this
    clock), since their seconds may include another job's. Runs timed under load never."""
    quiet = [r for r in results if timed_under_load(r) is False]
    return quiet or [r for r in results if timed_under_load(r) is None]
