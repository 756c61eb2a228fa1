"""The observation/action spaces of an env family, read once from one instance."""
from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym


@dataclass(frozen=True)
class EnvSpaces:
    observation: gym.Space
    action: gym.Space

    @classmethod
    def of(cls, env_factory) -> "EnvSpaces":
        env = env_factory(True)
        try:
            return cls(env.observation_space, env.action_space)
        finally:
            env.close()
