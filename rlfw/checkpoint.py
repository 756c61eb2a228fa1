"""Checkpoints: one dict per file, written atomically, the newest N kept."""
from __future__ import annotations

import glob
import os
import tempfile

import torch

PREFIX = "ckpt_"


def checkpoint_dir(run_dir: str) -> str:
    return os.path.join(run_dir, "checkpoints")


def save_checkpoint(run_dir: str, step: int, state: dict, keep: int = 3) -> str:
    """Write ``checkpoints/ckpt_<step, 12 digits>.pt`` via a temp file + ``os.replace`` (a
    crash mid-write never leaves a truncated checkpoint), then drop all but ``keep`` newest."""
    folder = checkpoint_dir(run_dir)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{PREFIX}{step:012d}.pt")
    _write_atomically(path, state)
    for old in list_checkpoints(run_dir)[:-keep]:
        os.unlink(old)
    return path


def _write_atomically(path: str, state: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".pt")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def list_checkpoints(run_dir: str) -> list[str]:
    """Checkpoint paths, oldest first (zero-padded steps sort correctly as strings)."""
    return sorted(glob.glob(os.path.join(checkpoint_dir(run_dir), f"{PREFIX}*.pt")))


def latest_checkpoint(run_dir: str) -> str:
    """Newest checkpoint path; ``FileNotFoundError`` naming the folder when there is none."""
    found = list_checkpoints(run_dir)
    if not found:
        raise FileNotFoundError(
            f"no checkpoint in {run_dir!r}: expected files {checkpoint_dir(run_dir)}/"
            f"{PREFIX}<step>.pt written by a training run")
    return found[-1]


def load_checkpoint(path: str) -> dict:
    # Our own files hold numpy arrays and pickled env state, hence weights_only=False.
    return torch.load(path, map_location="cpu", weights_only=False)


BEST = "best.pt"


def best_checkpoint(run_dir: str) -> str:
    """``checkpoints/best.pt`` (the highest evaluation mean); ``FileNotFoundError`` if absent."""
    path = os.path.join(checkpoint_dir(run_dir), BEST)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no {BEST} in {checkpoint_dir(run_dir)!r}: it is written at "
                                "the first evaluation of a training run")
    return path


def save_best(run_dir: str, state: dict) -> str:
    """Overwrite ``checkpoints/best.pt`` atomically."""
    folder = checkpoint_dir(run_dir)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, BEST)
    _write_atomically(path, state)
    return path


def load_newest_valid(run_dir: str) -> tuple[str, dict, list[tuple[str, str]]]:
    """The newest checkpoint that loads: ``(path, state, skipped)``, where ``skipped`` lists
    ``(path, reason)`` for newer files that did not load (truncated by a full disk, say).
    ``FileNotFoundError`` when there are none, ``RuntimeError`` naming the folder when none
    loads."""
    found = list_checkpoints(run_dir)
    if not found:
        latest_checkpoint(run_dir)  # raises the no-checkpoint error
    skipped: list[tuple[str, str]] = []
    for path in reversed(found):
        try:
            return path, load_checkpoint(path), skipped
        except Exception as err:  # any unreadable file: try the next older one
            skipped.append((path, f"{type(err).__name__}: {err}".splitlines()[0]))
    reasons = "; ".join(f"{os.path.basename(p)} ({why})" for p, why in skipped)
    raise RuntimeError(f"no checkpoint in {checkpoint_dir(run_dir)!r} loads: {reasons}")
