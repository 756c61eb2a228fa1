"""Claiming a run folder: its lock (one run at a time), then what it may already hold."""

from __future__ import annotations

import os

from rlfw.runfolder.checkpoint import BEST, checkpoint_dir, latest_checkpoint, list_checkpoints
from rlfw.runfolder.folder_lock import FolderLock

# What a run writes that a fresh run must not overwrite (tuning.json and affinity.json
# describe the machine, not the run, and are rewritten freely).
RUN_FILES = ("config.json", "progress.csv")


def check_run_folder(log_dir: str, resume: bool) -> None:
    """A resumed run has a checkpoint; a fresh one finds none of a run's files (someone's
    config.json, progress.csv or checkpoints) to overwrite."""
    if resume:
        latest_checkpoint(log_dir)  # fails early, naming the folder, if there is none
        return
    found = [name for name in RUN_FILES if os.path.lexists(os.path.join(log_dir, name))]
    if list_checkpoints(log_dir) or os.path.lexists(os.path.join(checkpoint_dir(log_dir), BEST)):
        found.append("checkpoints")
    if found:
        raise ValueError(
            f"run folder {log_dir!r} already holds a run ({', '.join(found)}); "
            "resume it (--resume), or choose another log dir"
        )


def claim_run_folder(log_dir: str, resume: bool) -> FolderLock:
    """Lock ``log_dir`` (made if missing) for this process, then check what it holds; the
    lock is released again if the check fails."""
    if os.path.lexists(log_dir) and not os.path.isdir(log_dir):
        raise ValueError(f"log dir {log_dir!r} exists and is not a folder")
    lock = FolderLock.acquire(log_dir)
    try:
        check_run_folder(log_dir, resume)
    except BaseException:
        lock.release(discard=True)
        raise
    return lock
