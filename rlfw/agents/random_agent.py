"""A uniform-random agent: the trivial policy for sampler throughput measurements."""

from __future__ import annotations

import math
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlfw.agents.base import AgentState, AgentStep, ModelAgent, Observation
from rlfw.buffers import AgentInfo, tree_leaves


class RandomAgent(ModelAgent):
    """Discrete actions uniform from the sampler's per-slot noise (so the work and the
    determinism are those of a real agent, minus the network); logp is log(1/n), value 0."""

    noise_shape: tuple[int, ...] = ()
    noise_kind = "uniform"

    def __init__(self, action_space: gym.Space[Any]):
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"RandomAgent supports Discrete action spaces, got {action_space}")
        self.n = int(action_space.n)
        self.model = nn.Module()  # no weights: nothing to train or to ship to workers
        self.greedy = False
        self._logp = -math.log(self.n)

    def step(
        self,
        obs: Observation,
        noise: np.ndarray | torch.Tensor,
        slots: Sequence[int] | None = None,
        state: AgentState = None,
    ) -> AgentStep:
        # In numpy: a handful of tiny torch ops would cost more than the rest of a sampler
        # step, and this agent stands for "no network" in throughput measurements.
        u = np.asarray(noise, dtype=np.float32)
        action = np.minimum((u * np.float32(self.n)).astype(np.int64), self.n - 1)
        return AgentStep(
            torch.from_numpy(action),
            AgentInfo(
                torch.from_numpy(np.full(u.shape, self._logp, np.float32)),
                torch.from_numpy(np.zeros(u.shape, np.float32)),
            ),
        )

    def value(self, obs: Observation, state: AgentState = None) -> torch.Tensor:
        return torch.zeros(len(tree_leaves(obs)[0]))  # any leaf's rows

    def env_action(self, action: torch.Tensor) -> np.ndarray:
        return action.numpy()
