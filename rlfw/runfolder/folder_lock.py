"""One run per folder: an exclusive ``flock`` on ``RUN/.rlfw.lock`` held for the whole run.

The kernel drops the lock when its holder exits, crashed or not, so a stale lock never
blocks a resume; a second run into a held folder is refused at once, naming the holder."""

from __future__ import annotations

import errno
import fcntl
import os
from typing import IO

LOCK_NAME = ".rlfw.lock"


class FolderBusyError(ValueError):
    """The run folder is held by another running process."""


class FolderLock:
    """``FolderLock.acquire(run_dir)`` holds ``run_dir`` (made if missing) until
    ``release()`` or the process ends."""

    def __init__(self, run_dir: str, fd: int, created: bool):
        self.run_dir, self.created = run_dir, created
        # a file object, not a bare fd: a lock nobody releases is dropped when collected
        self._file: IO[bytes] | None = os.fdopen(fd, "r+b", buffering=0)

    @classmethod
    def acquire(cls, run_dir: str) -> "FolderLock":
        created = not os.path.lexists(run_dir)
        os.makedirs(run_dir, exist_ok=True)
        path = os.path.join(run_dir, LOCK_NAME)
        # O_NOFOLLOW: a symlink planted as the lock file is refused, never written through.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = _read_pid(fd)
            os.close(fd)
            if err.errno in (errno.EWOULDBLOCK, errno.EACCES):
                raise FolderBusyError(
                    f"run folder {run_dir!r} is in use by another rlfw run (pid {holder}); "
                    "wait for it to end, or choose another --log-dir"
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(run_dir, fd, created)

    @property
    def held(self) -> bool:
        return self._file is not None

    def release(self, discard: bool = False) -> None:
        """Idempotent. The file stays (removing it would let two runs lock two files), except
        with ``discard``: a run that failed before writing anything takes back the folder it
        made, if only the lock is in it."""
        if self._file is None:
            return
        file, self._file = self._file, None
        if discard and self.created and os.listdir(self.run_dir) == [LOCK_NAME]:
            os.unlink(os.path.join(self.run_dir, LOCK_NAME))
            os.rmdir(self.run_dir)
        fcntl.flock(file.fileno(), fcntl.LOCK_UN)
        file.close()

    def __enter__(self) -> "FolderLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_pid(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode().strip() or "unknown"
    except (OSError, UnicodeDecodeError):
        return "unknown"
