"""MiniGrid (Chevalier-Boisvert et al., 2023) under its own ids (``MiniGrid-DoorKey-5x5-v0``,
..., and BabyAI's levels, ``BabyAI-GoToRedBall-v0``), with extra ``[minigrid]``. rlfw
imports the package (which registers the ids) the first time such an id is named, and reads
its 7x7x3 view as what it is: tile codes (object, colour, state), not pixels, so the model
one-hot encodes them."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import gymnasium as gym
import numpy as np

# BabyAI's levels come with the minigrid package (its registry), on the same grid world
PREFIXES = ("MiniGrid-", "BabyAI-")


def is_minigrid(env_id: str) -> bool:
    """One of the minigrid package's ids: MiniGrid's gridworlds or BabyAI's levels."""
    return env_id.startswith(PREFIXES)


def register_minigrid_envs() -> None:
    """Import ``minigrid`` (it registers its ids); nothing without the package."""
    if importlib.util.find_spec("minigrid") is not None:
        importlib.import_module("minigrid")


class TileCodes(gym.ObservationWrapper):
    """The ``image`` leaf as ``MultiDiscrete`` codes (uint8 ``[7, 7, 3]``, each cell's
    object, colour and state index): the values are unchanged, the space now says they
    are categories, which the encoders one-hot."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX

        space = env.observation_space
        assert isinstance(space, gym.spaces.Dict) and "image" in space.spaces
        shape = space["image"].shape
        assert shape is not None
        sizes = np.array([len(OBJECT_TO_IDX), len(COLOR_TO_IDX), len(STATE_TO_IDX)])
        nvec = np.broadcast_to(sizes, shape).copy()
        self.observation_space = gym.spaces.Dict(
            {**space.spaces, "image": gym.spaces.MultiDiscrete(nvec, dtype=np.uint8)}
        )

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        return observation
