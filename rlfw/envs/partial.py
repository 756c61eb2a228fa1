"""Partially observed variants of classic tasks, registered with gymnasium on import of
``rlfw.envs``: memory is what solves them (the recurrent agents' proving ground)."""

from __future__ import annotations

from typing import Any, Sequence, cast

import gymnasium as gym
import numpy as np

CARTPOLE_NO_VELOCITY = "rlfw/CartPoleNoVel-v1"


class KeepObservationEntries(gym.ObservationWrapper):
    """Only the entries ``keep`` of a flat Box observation (e.g. CartPole's positions
    without their velocities)."""

    def __init__(self, env: gym.Env, keep: Sequence[int]):
        super().__init__(env)
        self.keep = np.asarray(keep)
        space = cast(gym.spaces.Box, env.observation_space)  # a flat Box, as documented
        self.observation_space = gym.spaces.Box(
            space.low[self.keep], space.high[self.keep], (len(self.keep),), space.dtype
        )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        kept: np.ndarray = observation[self.keep]
        return kept


def cartpole_no_velocity(**kwargs: Any) -> gym.Env:
    """CartPole-v1 observing cart position and pole angle only (the velocities are gone):
    sb3-contrib's / rl-zoo's CartPoleNoVel-v1."""
    return KeepObservationEntries(gym.make("CartPole-v1", **kwargs), keep=(0, 2))


def register_partial_envs() -> None:
    """Register the ids above with gymnasium (idempotent: worker processes import too)."""
    if CARTPOLE_NO_VELOCITY not in gym.registry:
        gym.register(CARTPOLE_NO_VELOCITY, entry_point=cartpole_no_velocity)
