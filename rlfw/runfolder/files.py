"""Writing a run folder's files: whole or not at all, never through a symlink.

Each file is written to a temp file in its own folder and renamed over the target:
``os.replace`` swaps the directory entry, so a crash leaves the old file or the new one (never
half of one), and a symlink planted at the target is replaced, not followed out of the
folder."""

from __future__ import annotations

import json
import os
import tempfile
from typing import IO, Any, Callable


def write_atomically(
    path: str, write: Callable[[IO[Any]], object], binary: bool = True, fsync: bool = False
) -> None:
    """Call ``write(f)`` on a temp file next to ``path``, then rename it to ``path``.
    ``fsync``: flush it to disk first (checkpoints: they must survive a power cut)."""
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        f: IO[Any]
        with (
            os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")
        ) as f:
            write(f)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide shared run folders from the group
        os.replace(tmp, path)
    except BaseException as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(err, OSError) and err.filename is None:  # name the file, not a temp
            raise type(err)(err.errno, err.strerror or str(err), path) from None
        raise


def write_text(path: str, text: str) -> None:
    write_atomically(path, lambda f: f.write(text), binary=False)


def write_json(path: str, data: Any) -> None:
    """``data`` as indented JSON (keys sorted; values JSON cannot hold written as text)."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_json_object(path: str, what: str) -> dict[str, Any]:
    """A JSON object from ``path``; ``ValueError`` naming the file when it is not one."""
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as err:
            raise ValueError(f"{what} {path} is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"{what} {path} holds a JSON {type(data).__name__}, not an object of config keys"
        )
    return data
