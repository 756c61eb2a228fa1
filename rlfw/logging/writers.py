"""Logger output formats: a stdout table, CSV, and TensorBoard (when installed)."""
from __future__ import annotations

import csv
import math
import os
from typing import Callable, Protocol


class Writer(Protocol):
    def write(self, values: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class StdoutTable:
    """A two-column table per dump, grouped by key namespace (``rollout/``, ``train/`` ...).
    ``emit`` defaults to ``print``; the runner passes ``tqdm.write`` so bars stay intact."""

    def __init__(self, emit: Callable[[str], None] = print):
        self.emit = emit

    def write(self, values: dict[str, float], step: int) -> None:
        rows = [("step", f"{step}")] + [(k, _fmt(v)) for k, v in sorted(values.items())]
        width_k = max(len(k) for k, _ in rows)
        width_v = max(len(v) for _, v in rows)
        line = "-" * (width_k + width_v + 7)
        body = [f"| {k:<{width_k}} | {v:>{width_v}} |" for k, v in rows]
        self.emit("\n".join([line, *body, line]))

    def close(self) -> None:
        pass


def _fmt(value: float) -> str:
    if isinstance(value, float) and not math.isnan(value) and value != int(value):
        return f"{value:.4g}"
    return f"{value:g}" if isinstance(value, float) else str(value)


class CsvWriter:
    """``progress.csv``; a key first seen later rewrites the file with the wider header, so
    every row always has every column (missing values left empty)."""

    def __init__(self, path: str, append: bool = False):
        self.path = path
        self.keys: list[str] = []
        self.rows: list[dict[str, float]] = []
        if append and os.path.exists(path):
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                self.keys = list(reader.fieldnames or [])
                self.rows = [dict(r) for r in reader]

    def write(self, values: dict[str, float], step: int) -> None:
        row = {"step": step, **values}
        new_keys = [k for k in row if k not in self.keys]
        self.rows.append(row)
        if new_keys or not os.path.exists(self.path):
            self.keys += new_keys
            with open(self.path, "w", newline="") as f:
                writer = csv.DictWriter(f, self.keys)
                writer.writeheader()
                writer.writerows(self.rows)
        else:
            with open(self.path, "a", newline="") as f:
                csv.DictWriter(f, self.keys).writerow(row)

    def close(self) -> None:
        pass


class TensorBoardWriter:
    """Scalars to ``events.out.tfevents.*`` via ``torch.utils.tensorboard`` (extra ``tb``)."""

    def __init__(self, log_dir: str):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir)

    def write(self, values: dict[str, float], step: int) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def tensorboard_available() -> bool:
    try:
        import tensorboard  # noqa: F401
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError:
        return False
    return True
