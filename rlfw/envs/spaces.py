"""The observation/action spaces of an env family, read once from one instance."""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym


@dataclass(frozen=True)
class EnvSpaces:
    """An env's spaces, and ``frame_stack``: how many frames its observations stack along
    their first axis (gymnasium's ``FrameStackObservation``; 1: none). Only the env can
    say: a uint8 ``[4, 10, 10]`` is four frames on Atari and four object maps on MinAtar."""

    observation: gym.Space
    action: gym.Space
    frame_stack: int = 1

    @classmethod
    def of(cls, env_factory) -> "EnvSpaces":
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
