"""``record(key, value)`` then ``dump(step)`` to every writer (the SB3-style logger)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable

from rlfw.logging.writers import Writer


class Logger:
    """Values recorded under one key between dumps are averaged (NaNs ignored)."""

    def __init__(self, writers: Iterable[Writer] = ()):
        self.writers = list(writers)
        self._values: dict[str, list[float]] = defaultdict(list)

    def record(self, key: str, value: float) -> None:
        self._values[key].append(float(value))

    def record_many(self, values: dict[str, float]) -> None:
        for key, value in values.items():
            self.record(key, value)

    def dump(self, step: int) -> dict[str, float]:
        means = {}
        for key, vals in self._values.items():
            finite = [v for v in vals if not math.isnan(v)]
            means[key] = sum(finite) / len(finite) if finite else float("nan")
        for writer in self.writers:
            writer.write(means, step)
        self._values.clear()
        return means

    def video(self, key: str, path: str, step: int) -> None:
        """A video file (mp4) to the writers that take videos (W&B); the others skip it."""
        for writer in self.writers:
            if hasattr(writer, "write_video"):
                writer.write_video(key, path, step)

    def close(self) -> None:
        for writer in self.writers:
            writer.close()
