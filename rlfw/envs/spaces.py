"""The observation/action spaces of an env family, read once from one instance, and how
each leaf of any gymnasium observation space maps to the buffer (its dtype and shape)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym
import numpy as np

# Leaves that live in a [T, B] block of shared memory: fixed shape, numeric dtype.
ARRAY_LEAVES = (
    gym.spaces.Box,
    gym.spaces.Discrete,
    gym.spaces.MultiDiscrete,
    gym.spaces.MultiBinary,
)


@dataclass(frozen=True)
class EnvSpaces:
    """An env's spaces, and ``frame_stack``: how many frames its observations stack along
    their first axis (gymnasium's ``FrameStackObservation``; 1: none). Only the env can
    say: a uint8 ``[4, 10, 10]`` is four frames on Atari and four object maps on MinAtar."""

    observation: gym.Space[Any]
    action: gym.Space[Any]
    frame_stack: int = 1

    @classmethod
    def of(cls, env_factory: Callable[[bool], gym.Env]) -> "EnvSpaces":
        env = env_factory(True)
        try:
            return cls(env.observation_space, env.action_space, stacked_frames(env))
        finally:
            env.close()


def stacked_frames(env: gym.Env) -> int:
    """The stack size of the outermost ``FrameStackObservation`` around ``env`` (1: none)."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.FrameStackObservation):
            return int(env.stack_size)
        env = env.env
    return 1


def space_leaves(space: gym.Space[Any], prefix: str = "") -> list[tuple[str, gym.Space[Any]]]:
    """``(path, leaf space)`` pairs in the order the buffer keeps them (a Dict's keys as
    gymnasium sorts them, a Tuple's by index); a path reads ``image``, ``robot.joints``,
    ``1``; a bare space's path is ``""``."""
    if isinstance(space, gym.spaces.Dict):
        items: Any = space.spaces.items()
    elif isinstance(space, gym.spaces.Tuple):
        items = enumerate(space.spaces)
    else:
        return [(prefix, space)]
    out = []
    for key, sub in items:
        out += space_leaves(sub, f"{prefix}.{key}" if prefix else str(key))
    return out


def leaf_keys(space: gym.Space[Any], path: str) -> list[Any]:
    """The dict keys / tuple indices that lead from ``space`` (and from its observations)
    to the leaf at ``path``."""
    keys: list[Any] = []
    for part in path.split(".") if path else []:
        keys.append(int(part) if isinstance(space, gym.spaces.Tuple) else part)
        space = getattr(space, "spaces")[keys[-1]]
    return keys


def leaf_dtype(space: gym.Space[Any]) -> np.dtype:
    """The buffer dtype of one leaf: the space's own (bool, int8, uint8, float32, ...);
    MultiBinary as int8 (gymnasium's)."""
    return np.dtype(space.dtype)


def check_observation_space(space: gym.Space[Any]) -> None:
    """``ValueError`` naming the first leaf that cannot live in a fixed-shape block of
    shared memory (``Text``, ``Sequence``, ``Graph``, MiniGrid's ``MissionSpace``) and the
    way out: drop it (``--set env_options.drop_keys=KEY``) or wrap the env."""
    for path, leaf in space_leaves(space):
        if not isinstance(leaf, ARRAY_LEAVES):
            where = f"observation key {path!r}" if path else "the observation"
            remedy = (
                f"drop it with --set env_options.drop_keys={path.split('.')[0]} "
                "(or a gymnasium wrapper that encodes it as a Box)"
                if path
                else "wrap the env so it observes a Box, Discrete, MultiDiscrete or "
                "MultiBinary (or a Dict/Tuple of them)"
            )
            raise ValueError(
                f"{where} is a {type(leaf).__name__} ({leaf}), which has no fixed shape "
                f"and dtype for the [T, B] buffer: {remedy}"
            )
        if leaf.shape is None:
            raise ValueError(f"observation key {path!r} ({leaf}) has no fixed shape")


def example_observation(space: gym.Space[Any]) -> Any:
    """A zero observation with the space's structure, each leaf with its buffer dtype
    and shape: the example the buffers are allocated from."""
    check_observation_space(space)
    if isinstance(space, gym.spaces.Dict):
        return {key: example_observation(sub) for key, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(example_observation(sub) for sub in space.spaces)
    return np.zeros(space.shape, leaf_dtype(space))


def observation_rows(space: gym.Space[Any], n: int) -> Any:
    """``n`` zeroed rows of observations with the space's structure (numpy leaves)."""
    check_observation_space(space)
    if isinstance(space, gym.spaces.Dict):
        return {key: observation_rows(sub, n) for key, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(observation_rows(sub, n) for sub in space.spaces)
    return np.zeros((n,) + tuple(space.shape or ()), leaf_dtype(space))
