"""Logger output formats: a stdout table, CSV, and TensorBoard (when installed)."""

from __future__ import annotations

import csv
import math
import os
from typing import IO, Any, Callable, Protocol

from rlfw.runfolder.files import write_atomically

# a row as written (step and floats) or as read back from an existing file (strings)
Row = dict[str, float | str]


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
    """``progress.csv``, rewritten whole through a temp file at each row (a crash leaves the
    previous rows intact, never half a row; a symlink at the path is replaced, not
    followed). A key first seen later widens the header, so every row has every column
    (missing values left empty).

    ``append`` continues the rows already in the file, keeping only well-formed rows up to
    ``upto_step`` (a resumed run's checkpoint: rows written after it are logged again)."""

    def __init__(self, path: str, append: bool = False, upto_step: int | None = None):
        self.path = path
        self.keys: list[str] = []
        self.rows: list[Row] = []
        if append and os.path.isfile(path) and not os.path.islink(path):
            self.keys, self.rows = _read_rows(path, upto_step)

    def write(self, values: dict[str, float], step: int) -> None:
        row: Row = {"step": step, **values}
        self.keys += [k for k in row if k not in self.keys]
        self.rows.append(row)
        write_atomically(self.path, self._write_all, binary=False)

    def _write_all(self, f: IO[Any]) -> None:
        writer = csv.DictWriter(f, self.keys)
        writer.writeheader()
        writer.writerows(self.rows)

    def close(self) -> None:
        pass


def _read_rows(path: str, upto_step: int | None) -> tuple[list[str], list[Row]]:
    """The header and the rows worth keeping: every column present, a whole-number step, at
    most ``upto_step``."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        keys = next(reader, [])
        rows: list[Row] = []
        for cells in reader:
            if len(cells) != len(keys) or not keys or keys[0] != "step":
                continue  # a row cut short by a crash
            try:
                step = int(cells[0])
            except ValueError:
                continue
            if upto_step is None or step <= upto_step:
                rows.append(dict(zip(keys, cells)))
    return keys, rows


class TensorBoardWriter:
    """Scalars to ``events.out.tfevents.*`` via ``torch.utils.tensorboard`` (extra ``tb``)."""

    def __init__(self, log_dir: str, purge_step: int | None = None):
        from torch.utils.tensorboard import SummaryWriter

        # purge_step: a resumed run drops the events logged after its checkpoint
        self.writer = SummaryWriter(log_dir, purge_step=purge_step)

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
