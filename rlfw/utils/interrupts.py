"""Ctrl-C that waits for a write to finish: inside ``deferred_interrupt()`` a SIGINT is noted
and raised as ``KeyboardInterrupt`` when the block ends, so it never lands halfway through
a checkpoint, a progress row or a TensorBoard flush (whose writer thread, cut mid-flush,
could keep the process from exiting)."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold SIGINT for the block (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        if previous is signal.default_int_handler:
            raise KeyboardInterrupt
        if callable(previous):  # an enclosing deferral, or a handler of the caller's
            previous(signal.SIGINT, None)
