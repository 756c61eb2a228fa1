"""gymnasium-robotics' goal-conditioned envs (Fetch, Shadow hand, mazes) under their own
ids (``FetchReach-v4``, ...), with extra ``[robotics]``. rlfw imports the package and
registers its ids the first time such an id is named, in every process that makes one."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io

import gymnasium as gym

PREFIXES = (
    "Fetch",
    "HandManipulate",
    "HandReach",
    "PointMaze_",
    "AntMaze_",
    "AdroitHand",
    "FrankaKitchen",
)


def is_robotics(env_id: str) -> bool:
    return env_id.startswith(PREFIXES)


def register_robotics_envs() -> None:
    """Register gymnasium-robotics' ids (idempotent; nothing without the package)."""
    if importlib.util.find_spec("gymnasium_robotics") is None:
        return
    # 1.4.2 prints a notice about its Adroit envs' rewards to stderr at every import,
    # into every run's and worker's output (errors still raise)
    with contextlib.redirect_stderr(io.StringIO()):
        module = importlib.import_module("gymnasium_robotics")
    gym.register_envs(module)
