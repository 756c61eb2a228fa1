"""Pickles that only their writer may load: an HMAC-SHA256 tag under a per-user key.

Some state can only be captured by pickling (an env's own internals: a physics engine's
arrays, an emulator, wrappers' counters), and unpickling runs whatever code the pickle
names. A run folder may come from someone else, so such a pickle is sealed with a key that
lives outside every run folder (``~/.config/rlfw/pickle.key``, or ``$RLFW_KEY_FILE``) and is
unpickled only when its tag verifies: pickles this user's runs wrote load, anyone else's are
refused before a byte of them is interpreted."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets

KEY_BYTES = 32


class UnsealedError(ValueError):
    """A sealed pickle whose tag does not verify under this user's key."""


def key_path() -> str:
    """``$RLFW_KEY_FILE``, else ``$XDG_CONFIG_HOME/rlfw/pickle.key`` (``~/.config``)."""
    explicit = os.environ.get("RLFW_KEY_FILE")
    if explicit:
        return explicit
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(
        os.path.expanduser("~"), ".config"
    )
    return os.path.join(config_home, "rlfw", "pickle.key")


def user_key() -> bytes:
    """This user's key, created (readable by the user only) the first time it is needed.
    Two processes creating it at once agree: the first link wins, both read it."""
    path = key_path()
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, mode=0o700, exist_ok=True)
    tmp = os.path.join(folder, f".pickle.key.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # fails if another process made the key first
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)
    return _read_key(path)


def _read_key(path: str) -> bytes:
    with open(path, "rb") as f:
        key = f.read()
    if len(key) != KEY_BYTES:
        raise UnsealedError(
            f"the rlfw key file {path} holds {len(key)} bytes, not "
            f"{KEY_BYTES}: it was not written by rlfw; move it away and rlfw "
            "makes a new one (pickles sealed with the old key stop loading)"
        )
    return key


def tag(blob: bytes) -> str:
    """The blob's HMAC-SHA256 under this user's key, as hex."""
    return hmac.new(user_key(), blob, hashlib.sha256).hexdigest()


def verify(blob: bytes, claimed: str) -> None:
    """``UnsealedError`` unless ``claimed`` is ``blob``'s tag under this user's key."""
    if not isinstance(claimed, str) or not hmac.compare_digest(tag(blob), claimed):
        raise UnsealedError(
            f"its pickled env state is not sealed with this user's key ({key_path()}): it "
            "was written by another user or machine, or altered, and unpickling it could "
            "run code"
        )
