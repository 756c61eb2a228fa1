"""``with timing.add_time('sample'):`` blocks, reported as ``time/*`` seconds."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Iterator


class Timing:
    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)

    @contextmanager
    def add_time(self, key: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.totals[key] += time.perf_counter() - start

    def take(self) -> dict[str, float]:
        """Seconds per key since the last ``take``, as ``time/<key>``; resets the totals."""
        out = {f"time/{k}": v for k, v in self.totals.items()}
        self.totals.clear()
        return out
