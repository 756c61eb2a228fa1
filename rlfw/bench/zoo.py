"""rl-baselines3-zoo's hyper-parameters (the SB3 peer's settings), read from the installed
``rl_zoo3`` package, not copied by hand."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from rlfw.envs import is_atari


def zoo_table(algo: str) -> dict[str, Any]:
    """The zoo's ``hyperparams/<algo>.yml``: env id (or ``atari``) -> its settings."""
    import rl_zoo3
    import yaml

    path = os.path.join(os.path.dirname(rl_zoo3.__file__), "hyperparams", f"{algo}.yml")
    with open(path) as f:
        table: dict[str, Any] = yaml.safe_load(f)
    return table


def _v4_of(env_id: str) -> str | None:
    """The zoo tunes MuJoCo on -v4 ids: the -v4 id whose block a -v5 id takes."""
    return env_id[:-3] + "-v4" if env_id.endswith("-v5") else None


def zoo_settings(algo: str, env_id: str) -> dict[str, Any] | None:
    """The block of the zoo's file that the peer runs ``env_id`` with (its own, a -v5 id's
    -v4 block, or ``atari`` for an Atari id), or None where the zoo has none."""
    table = zoo_table(algo)
    for key in (env_id, _v4_of(env_id), "atari" if is_atari(env_id) else None):
        if key in table:
            block: dict[str, Any] = table[key]
            return block
    return None


def zoo_hyperparams_file(algo: str, env_id: str, out_dir: str) -> tuple[str | None, str]:
    """The zoo's hyperparameter file for ``algo``, and which of its keys ``env_id`` uses.
    A -v5 id gets its -v4 block through a one-entry file in ``out_dir`` that holds exactly
    that block. Returns (None, key) when the zoo's own file has the id (or its family
    default)."""
    import yaml

    table = zoo_table(algo)
    v4 = _v4_of(env_id)
    if env_id in table or v4 is None:
        return None, env_id if env_id in table else "atari/default"
    if v4 not in table:
        return None, "default"
    fd, own = tempfile.mkstemp(suffix=".yml", dir=out_dir)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump({env_id: table[v4]}, f)
    return own, v4
