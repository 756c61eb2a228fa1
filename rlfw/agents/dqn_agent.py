"""DQN agent: a Q-network with ε-greedy exploration, one ε per env slot."""
from __future__ import annotations

from typing import NamedTuple, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlfw.agents.actor_critic import AgentStep
from rlfw.agents.base import ModelAgent
from rlfw.buffers.tree import LeafIndexing
from rlfw.envs.spaces import EnvSpaces
from rlfw.models.q_network import QNetwork


class QInfo(NamedTuple):
    """Per-step agent output kept in the samples: max_a Q(obs, a) at sampling time."""

    value: torch.Tensor
    __getitem__ = LeafIndexing.getitem
    __setitem__ = LeafIndexing.setitem


class EpsilonGreedyQ(nn.Module):
    """The Q-network plus the per-slot ε as a buffer: ε then travels with the weights to
    parallel-sampler workers, which receive ``state_dict()`` copies."""

    def __init__(self, q: QNetwork, n_slots: int):
        super().__init__()
        self.q = q
        self.register_buffer("epsilon", torch.ones(n_slots))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.q(obs)


def apex_epsilons(n_slots: int, base: float = 0.4, alpha: float = 7.0) -> np.ndarray:
    """Ape-X's fixed per-actor exploration: ε_i = base^(1 + α i / (N - 1))."""
    if n_slots == 1:
        return np.array([base])
    return base ** (1 + alpha * np.arange(n_slots) / (n_slots - 1))


class DqnAgent(ModelAgent):
    """``step`` is ε-greedy from the sampler's noise ``[u_explore, u_action]`` per slot;
    greedy (``eval_mode``) takes the argmax."""

    noise_shape = (2,)
    noise_kind = "uniform"

    def __init__(self, q: QNetwork, n_actions: int, n_slots: int, device: str = "cpu"):
        self.model = EpsilonGreedyQ(q, n_slots).to(device)
        self.n_actions = n_actions
        self.device = torch.device(device)
        self.greedy = False

    @classmethod
    def build(cls, spaces: EnvSpaces, n_slots: int, model: str = "auto",
              hidden: Sequence[int] = (256, 256), dueling: bool = False,
              device: str = "cpu") -> "DqnAgent":
        if not isinstance(spaces.action, gym.spaces.Discrete):
            raise ValueError(f"action space {spaces.action} is not supported by dqn: DQN needs "
                             "a Discrete action space")
        obs = spaces.observation
        if not isinstance(obs, gym.spaces.Box):
            raise ValueError(f"observation space {obs} is not supported: use a Box")
        q = QNetwork(obs.shape, obs.dtype, int(spaces.action.n), hidden, dueling, model)
        return cls(q, int(spaces.action.n), n_slots, device)

    @property
    def q(self) -> QNetwork:
        return self.model.q

    def set_epsilon(self, epsilon: float | np.ndarray) -> None:
        self.model.epsilon.copy_(torch.as_tensor(epsilon, dtype=torch.float32).expand_as(
            self.model.epsilon))

    @torch.no_grad()
    def step(self, obs, noise, slots: Sequence[int] | None = None) -> AgentStep:
        q = self.model(torch.as_tensor(obs, device=self.device))
        best = q.argmax(-1)
        if self.greedy:
            action = best
        else:
            u = torch.as_tensor(noise, device=self.device)
            eps = self.model.epsilon if slots is None else self.model.epsilon[list(slots)]
            random = (u[:, 1] * self.n_actions).long().clamp_(max=self.n_actions - 1)
            action = torch.where(u[:, 0] < eps[: len(u)], random, best)
        return AgentStep(action, QInfo(q.max(-1).values))

    @torch.no_grad()
    def value(self, obs) -> torch.Tensor:
        return self.model(torch.as_tensor(obs, device=self.device)).max(-1).values

    def env_action(self, action: torch.Tensor) -> np.ndarray:
        return action.cpu().numpy()
