"""Checkpoints: one dict per file, written atomically, the newest N kept."""
from __future__ import annotations

import glob
import os
import random
import tempfile

import numpy as np
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
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".pt")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    for old in list_checkpoints(run_dir)[:-keep]:
        os.unlink(old)
    return path


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


def capture_rng() -> dict:
    """The process-global RNG states: python, numpy and torch."""
    return {"python": random.getstate(), "numpy": np.random.get_state(),
            "torch": torch.get_rng_state()}


def restore_rng(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
