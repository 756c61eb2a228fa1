"""Checkpoints: one dict per file, written atomically, the newest N kept, loaded without
running code.

A checkpoint may come from someone else, and unpickling is running code. So a file holds
only what ``torch.load(weights_only=True)`` reads without importing anything: tensors,
numbers, strings, lists, tuples and dicts. numpy arrays are stored as their raw bytes in a
uint8 tensor with dtype and shape beside it; a ``bytes`` value (a pickle of env state, the
one thing that can only be captured by pickling) is stored sealed (``rlfw.runfolder.sealing``) and
handed back only when its seal verifies under this user's key.
"""

from __future__ import annotations

import glob
import os
import pickle
import re
from collections import OrderedDict
from typing import Any

import numpy as np
import torch

import rlfw.runfolder.sealing as sealing
from rlfw.buffers.samples import AgentInfo, QInfo, Samples
from rlfw.runfolder.files import write_atomically

PREFIX = "ckpt_"
BEST = "best.pt"
FORMAT_KEY, FORMAT = "rlfw_checkpoint_format", 2
MARK = "__rlfw__"  # the key of a dict that stands for an array or a sealed pickle

# The NamedTuples a checkpoint may hold, by name: loading builds only these.
RECORDS = {cls.__name__: cls for cls in (Samples, AgentInfo, QInfo)}

TRUST_FLAG = "--trust-checkpoint"
PICKLES = ("verify", "drop", "trust")


class UnsafeCheckpointError(ValueError):
    """A checkpoint that cannot be loaded without the risk of running code."""


def checkpoint_dir(run_dir: str) -> str:
    return os.path.join(run_dir, "checkpoints")


# -- encoding ------------------------------------------------------------------------------
def encode(value: Any, where: str = "state") -> Any:
    """``value`` as a tree ``weights_only`` loading reads back (see the module docstring);
    ``TypeError`` naming the place of anything else."""
    if (
        isinstance(value, torch.Tensor)
        or value is None
        or isinstance(value, (bool, int, float, str))
    ):
        return value
    if isinstance(value, dict):
        if MARK in value:
            raise TypeError(f"checkpoint state at {where!r} uses the reserved key {MARK!r}")
        items = ((k, encode(v, f"{where}.{k}")) for k, v in value.items())
        return OrderedDict(items) if isinstance(value, OrderedDict) else dict(items)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        name = type(value).__name__
        if RECORDS.get(name) is not type(value):
            raise TypeError(
                f"checkpoint state at {where!r} is a {name}, which is not one of "
                f"the records checkpoints hold ({', '.join(RECORDS)})"
            )
        return {
            MARK: "record",
            "type": name,
            "fields": [encode(v, f"{where}.{f}") for f, v in zip(value._fields, value)],
        }
    if isinstance(value, (list, tuple)):
        encoded = [encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(encoded) if isinstance(value, tuple) else encoded
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype.hasobject:
            raise TypeError(
                f"checkpoint state at {where!r} is a numpy array of Python objects; "
                "checkpoints hold numeric arrays only"
            )
        array = np.ascontiguousarray(value)
        raw = array.reshape(-1).view(np.uint8)
        if not raw.flags.writeable:  # torch wraps only writable memory
            raw = raw.copy()
        # no copy otherwise: a saved replay buffer is the run's largest array
        return {
            MARK: "ndarray",
            "dtype": array.dtype.str,
            "shape": list(np.shape(value)),
            "scalar": isinstance(value, np.generic),
            "data": torch.from_numpy(raw),
        }
    if isinstance(value, bytes):
        return {
            MARK: "sealed",
            "mac": sealing.tag(value),
            "data": torch.frombuffer(bytearray(value), dtype=torch.uint8),
        }
    raise TypeError(
        f"checkpoint state at {where!r} is a {type(value).__name__}; checkpoints "
        "hold tensors, numpy arrays, numbers, strings, bytes, lists and dicts only"
    )


def decode(value: Any, pickles: str = "verify") -> Any:
    """The tree ``encode`` was given. A sealed pickle comes back as ``bytes`` when its seal
    verifies (``pickles='verify'``: else ``UnsealedError``), as ``None`` with ``'drop'`` (the
    caller needs no env state), unchecked with ``'trust'``."""
    if isinstance(value, dict):
        kind = value.get(MARK)
        if kind == "ndarray":
            raw = value["data"].numpy()
            array = raw.view(np.dtype(value["dtype"])).reshape(value["shape"])
            return array[()] if value["scalar"] else array
        if kind == "record":
            if value["type"] not in RECORDS:
                raise UnsafeCheckpointError(
                    f"a record of type {value['type']!r}, which rlfw never writes"
                )
            return RECORDS[value["type"]](*(decode(v, pickles) for v in value["fields"]))
        if kind == "sealed":
            if pickles == "drop":
                return None
            blob = value["data"].numpy().tobytes()
            if pickles != "trust":
                sealing.verify(blob, value["mac"])
            return blob
        items = ((k, decode(v, pickles)) for k, v in value.items())
        return OrderedDict(items) if isinstance(value, OrderedDict) else dict(items)
    if isinstance(value, (list, tuple)):
        decoded = [decode(v, pickles) for v in value]
        return tuple(decoded) if isinstance(value, tuple) else decoded
    return value


# -- files ---------------------------------------------------------------------------------
def save_checkpoint(run_dir: str, step: int, state: dict[str, Any], keep: int = 3) -> str:
    """Write ``checkpoints/ckpt_<step, 12 digits>.pt`` atomically and fsync'd (a crash never
    leaves a truncated checkpoint), then drop all but ``keep`` newest."""
    folder = checkpoint_dir(run_dir)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{PREFIX}{step:012d}.pt")
    _write(path, state)
    for old in list_checkpoints(run_dir)[:-keep]:
        os.unlink(old)
    return path


def _write(path: str, state: dict[str, Any]) -> None:
    tree = {**encode(state), FORMAT_KEY: FORMAT}
    write_atomically(path, lambda f: torch.save(tree, f), fsync=True)


def list_checkpoints(run_dir: str) -> list[str]:
    """Checkpoint paths, oldest first (zero-padded steps sort correctly as strings)."""
    return sorted(glob.glob(os.path.join(checkpoint_dir(run_dir), f"{PREFIX}*.pt")))


def latest_checkpoint(run_dir: str) -> str:
    """Newest checkpoint path; ``FileNotFoundError`` naming the folder when there is none."""
    found = list_checkpoints(run_dir)
    if not found:
        raise FileNotFoundError(
            f"no checkpoint in {run_dir!r}: expected files {checkpoint_dir(run_dir)}/"
            f"{PREFIX}<step>.pt written by a training run"
        )
    return found[-1]


def load_checkpoint(path: str, pickles: str = "verify") -> dict[str, Any]:
    """A checkpoint's state, read without running code. ``UnsafeCheckpointError`` (naming
    the file) for one that holds pickled objects, e.g. written before the safe format;
    ``pickles='trust'`` loads those too, as ``--trust-checkpoint`` does (it may run code)."""
    if pickles not in PICKLES:
        raise ValueError(f"pickles must be one of {PICKLES}, got {pickles!r}")
    if os.path.islink(path):
        raise UnsafeCheckpointError(
            f"{path} is a symlink; rlfw reads only the run folder's own files"
        )
    try:
        tree = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        if pickles != "trust":
            raise UnsafeCheckpointError(_unsafe_reason(path, err)) from None
        # The user vouched for this file (an old rlfw checkpoint, say): the full unpickler.
        tree = torch.load(path, map_location="cpu", weights_only=False)
    if not isinstance(tree, dict):
        raise UnsafeCheckpointError(f"{path} holds a {type(tree).__name__}, not an rlfw checkpoint")
    tree.pop(FORMAT_KEY, None)
    try:
        decoded: dict[str, Any] = decode(tree, pickles)
        return decoded
    except sealing.UnsealedError as err:
        raise sealing.UnsealedError(
            f"{path}: {err}; if you trust where this run came from, pass {TRUST_FLAG}, or "
            "evaluate it (rlfw eval needs no env state)"
        ) from None


def _unsafe_reason(path: str, err: Exception) -> str:
    found = re.findall(r"GLOBAL ([\w.]+)", str(err))
    named = f" ({', '.join(dict.fromkeys(found))})" if found else ""
    return (
        f"{path} holds pickled objects{named}, and loading them could run code; refused. "
        f"A checkpoint written by rlfw before its safe format (0.2) looks like this: if you "
        f"trust where it came from, load it with {TRUST_FLAG}"
    )


def best_checkpoint(run_dir: str) -> str:
    """``checkpoints/best.pt`` (the highest evaluation mean); ``FileNotFoundError`` if absent."""
    path = os.path.join(checkpoint_dir(run_dir), BEST)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"no {BEST} in {checkpoint_dir(run_dir)!r}: it is written at "
            "the first evaluation of a training run"
        )
    return path


def save_best(run_dir: str, state: dict[str, Any]) -> str:
    """Overwrite ``checkpoints/best.pt`` atomically."""
    folder = checkpoint_dir(run_dir)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, BEST)
    _write(path, state)
    return path


def load_newest_valid(
    run_dir: str, pickles: str = "verify", first: str | None = None
) -> tuple[str, dict[str, Any], list[tuple[str, str]]]:
    """The newest checkpoint that loads: ``(path, state, skipped)``, where ``skipped`` lists
    ``(path, reason)`` for files that did not load (truncated by a full disk, crafted, sealed
    by someone else), tried newest first after ``first`` (``best.pt``, say) when given.
    ``FileNotFoundError`` when there are none, ``RuntimeError`` naming each file and why
    when none loads."""
    found = list_checkpoints(run_dir)
    if not found and first is None:
        latest_checkpoint(run_dir)  # raises the no-checkpoint error
    skipped: list[tuple[str, str]] = []
    for path in ([first] if first else []) + found[::-1]:
        try:
            return path, load_checkpoint(path, pickles), skipped
        except Exception as err:  # any unreadable file: try the next older one
            skipped.append((path, _one_line(err, path)))
    reasons = "; ".join(f"{os.path.basename(p)}: {why}" for p, why in skipped)
    raise RuntimeError(f"no checkpoint in {checkpoint_dir(run_dir)!r} loads: {reasons}")


def _one_line(err: Exception, path: str) -> str:
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    text = text.replace(f"{path}: ", "").replace(f"{path} ", "")
    return (
        text
        if isinstance(err, (UnsafeCheckpointError, sealing.UnsealedError))
        else f"{type(err).__name__}: {text}"
    )
