"""Invalid-action masks: where an env's mask comes from, and how it travels.

A mask travels with its observation, as one more leaf named ``action_mask`` of a Dict
observation: the samplers, buffers, replay and checkpoints then carry it aligned with the
observation it belongs to (the replay's next observation holds the next state's mask), and
an agent reads it from the observation it acts on. A mask given in ``info`` (Taxi's) is
moved into the observation by ``InfoMaskInObservation``; one in an observation key of
another name is renamed.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

MASK_KEY = "action_mask"
MASK_MODES = ("auto", "info", "none")  # or the name of the observation key holding it


def mask_size(action_space: gym.Space[Any]) -> int | None:
    """Entries of a mask over ``action_space`` (Discrete: n; MultiDiscrete: sum(nvec),
    one block per head), or None when the space has no finite choices to mask."""
    if isinstance(action_space, gym.spaces.Discrete):
        return int(action_space.n)
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return int(action_space.nvec.sum())
    return None


def _mask_space(n: int) -> gym.Space[Any]:
    return gym.spaces.MultiBinary(n)


class InfoMaskInObservation(gym.Wrapper):
    """Moves ``info["action_mask"]`` into the observation: a Dict observation gains the
    key ``action_mask``; any other becomes ``{"observation": obs, "action_mask": mask}``."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        n = mask_size(env.action_space)
        if n is None:
            raise ValueError(
                f"env_options.action_mask='info' masks Discrete or MultiDiscrete actions; "
                f"this env's actions are {env.action_space}"
            )
        space = env.observation_space
        self.nested = isinstance(space, gym.spaces.Dict)
        leaves = dict(getattr(space, "spaces")) if self.nested else {"observation": space}
        if MASK_KEY in leaves:
            raise ValueError(
                f"the env observes a key {MASK_KEY!r} and gives one in info: choose one "
                f"with env_options.action_mask=info|{MASK_KEY}"
            )
        self.observation_space = gym.spaces.Dict({**leaves, MASK_KEY: _mask_space(n)})
        self.n = n

    def _with_mask(self, obs: Any, info: dict[str, Any]) -> dict[str, Any]:
        if MASK_KEY not in info:
            raise ValueError(
                f"env_options.action_mask='info' but the env's info has no {MASK_KEY!r} "
                f"(its keys: {sorted(info)}); set env_options.action_mask=none or a key"
            )
        mask = np.asarray(info[MASK_KEY]).astype(np.int8).reshape(-1)
        if mask.shape != (self.n,):
            raise ValueError(
                f"info[{MASK_KEY!r}] has {mask.size} entries; the actions "
                f"{self.env.action_space} need {self.n}"
            )
        out = dict(obs) if self.nested else {"observation": obs}
        out[MASK_KEY] = mask
        return out

    def reset(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return self._with_mask(obs, info), info

    def step(self, action: Any) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._with_mask(obs, info), reward, terminated, truncated, info


class RenameMaskKey(gym.ObservationWrapper):
    """A Dict observation whose mask lives under ``key``, with that key renamed
    ``action_mask`` (where rlfw's agents look)."""

    def __init__(self, env: gym.Env, key: str):
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Dict) or key not in space.spaces:
            keys = sorted(space.spaces) if isinstance(space, gym.spaces.Dict) else []
            raise ValueError(
                f"env_options.action_mask={key!r} names an observation key, and the "
                f"observation {space} has none of that name (its keys: {keys})"
            )
        self.key = key
        self.observation_space = gym.spaces.Dict(
            {(MASK_KEY if k == key else k): v for k, v in space.spaces.items()}
        )

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        return {(MASK_KEY if k == self.key else k): v for k, v in observation.items()}


def with_action_mask(env: gym.Env, mode: str) -> gym.Env:
    """``env`` with its mask (if any) in the observation key ``action_mask``: ``mode`` is
    'info', 'none' (no mask), an observation key, or 'auto', which here means the key
    ``action_mask`` if the observation has one (``resolve_mask_mode`` turns 'auto' into
    'info' for an env whose reset info carries the mask)."""
    if mode in ("none", "auto", MASK_KEY):
        return env
    if mode == "info":
        return InfoMaskInObservation(env)
    return RenameMaskKey(env, mode)


def resolve_mask_mode(env: gym.Env, mode: str) -> str:
    """'auto' made concrete for ``env`` (freshly built, closed by the caller): 'info' when
    its first reset's info has ``action_mask`` and the observation has no such key,
    else the mode unchanged. Resets ``env`` once, unseeded."""
    if mode != "auto" or mask_size(env.action_space) is None:
        return mode
    space = env.observation_space
    if isinstance(space, gym.spaces.Dict) and MASK_KEY in space.spaces:
        return mode
    _, info = env.reset()
    return "info" if MASK_KEY in info else mode


def masks_actions(observation_space: gym.Space[Any], mode: str) -> bool:
    """Whether an agent on this (wrapped) observation space acts over a mask."""
    return (
        mode != "none"
        and isinstance(observation_space, gym.spaces.Dict)
        and MASK_KEY in observation_space.spaces
    )
