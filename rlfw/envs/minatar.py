"""MinAtar (Young & Tian, 2019): five Atari-like games on a 10x10 grid, registered with
gymnasium as ``MinAtar/<Game>-v1`` (minimal action set) when rlfw's env layer loads and the
``minatar`` package is installed (extra ``[minatar]``). MinAtar's own gymnasium entry point
is not loaded by gymnasium 1.x, and its observations are bool ``[10, 10, C]`` channels
last: here they are uint8 ``[C, 10, 10]``, 0 or 255, so every image env (Atari's frames,
MinAtar's channels) is uint8 pixels the networks scale the same way."""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvCreator

# gymnasium name -> MinAtar's module name
GAMES = {
    "Asterix": "asterix",
    "Breakout": "breakout",
    "Freeway": "freeway",
    "Seaquest": "seaquest",
    "SpaceInvaders": "space_invaders",
}
# A game ends on its own (a lost ball, a death, Freeway's 2,500-frame clock) except when
# an agent plays well: Breakout's bricks come back. Truncated (and bootstrapped) here.
MAX_EPISODE_STEPS = 10_000
RENDER_SCALE = 16  # screen pixels per grid cell in rgb_array frames: 160x160
RENDER_FPS = 15  # videos play a game step per frame


def is_minatar(env_id: str) -> bool:
    return env_id.startswith("MinAtar/")


def minatar_id(game: str) -> str:
    return f"MinAtar/{game}-v1"


class ChannelsFirstPixels(gym.ObservationWrapper):
    """Bool ``[H, W, C]`` channels -> uint8 ``[C, H, W]`` with True as 255."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        height, width, channels = cast(gym.spaces.Box, env.observation_space).shape
        self.observation_space = gym.spaces.Box(0, 255, (channels, height, width), np.uint8)
        self.metadata = {**env.metadata, "render_fps": RENDER_FPS}

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(observation.transpose(2, 0, 1), dtype=np.uint8) * 255

    def render(self) -> Any:
        """MinAtar's colour picture (floats in [0, 1], one pixel per cell) as uint8 RGB,
        each cell ``RENDER_SCALE`` pixels wide, so videos and GIFs can show it."""
        frame = self.env.render()
        if self.render_mode != "rgb_array" or frame is None:
            return frame
        frame = (np.asarray(frame) * 255).round().astype(np.uint8)
        return frame.repeat(RENDER_SCALE, axis=0).repeat(RENDER_SCALE, axis=1)


def make_minatar(game: str, **kwargs: Any) -> gym.Env:
    """MinAtar's own gymnasium env for ``game`` (its defaults: sticky actions 0.1,
    difficulty ramping), minimal action set, channels-first uint8 observations."""
    # imported by the env, not by rlfw: it is an extra
    base_env = _import_minatar_gym().BaseEnv
    return ChannelsFirstPixels(base_env(game, use_minimal_action_set=True, **kwargs))


class _ImportedOnUse(types.ModuleType):
    """Stands for a module that is imported at its first attribute access."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(self.__name__), name)


def _import_minatar_gym() -> types.ModuleType:
    """``minatar.gym``, without importing seaborn: MinAtar's module imports it (with pandas
    and scipy, 1.2 s of CPU in every process that makes a MinAtar env, each sampler worker
    included) for the colour palette of its own display window alone. A stand-in takes
    seaborn's place while MinAtar loads and stays its ``sns``, importing seaborn if that
    window is ever opened; ``sys.modules`` is left as it was."""
    if "minatar.gym" in sys.modules or "seaborn" in sys.modules:
        return importlib.import_module("minatar.gym")
    stand_in = _ImportedOnUse("seaborn")
    sys.modules["seaborn"] = stand_in
    try:
        return importlib.import_module("minatar.gym")
    finally:
        if sys.modules.get("seaborn") is stand_in:
            del sys.modules["seaborn"]


def register_minatar_envs() -> None:
    """Register the five games (idempotent; nothing without the ``minatar`` package)."""
    if importlib.util.find_spec("minatar") is None:
        return
    for name, game in GAMES.items():
        if minatar_id(name) not in gym.registry:
            gym.register(
                minatar_id(name),
                # gymnasium passes ``game`` from ``kwargs``, which EnvCreator cannot say
                entry_point=cast(EnvCreator, make_minatar),
                kwargs={"game": game},
                max_episode_steps=MAX_EPISODE_STEPS,
            )
