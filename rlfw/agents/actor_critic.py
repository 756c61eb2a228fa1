"""Agent = actor-critic model + action distribution, for PPO and A2C."""
from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlfw.agents.base import AgentStep, ModelAgent
from rlfw.agents.distributions import Categorical, DiagGaussian
from rlfw.buffers import AgentInfo
from rlfw.envs.spaces import EnvSpaces
from rlfw.models import CnnActorCritic, MlpActorCritic
from rlfw.models.normalize import NormalizedModel

MODELS = ("auto", "mlp", "cnn")


def distribution_for(action_space: gym.Space, algo: str = "ppo/a2c"):
    if isinstance(action_space, gym.spaces.Discrete):
        return Categorical(int(action_space.n))
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return DiagGaussian(int(action_space.shape[0]))
    raise ValueError(
        f"action space {action_space} is not supported by {algo}: use Discrete or a 1-d Box")


class ActorCriticAgent(ModelAgent):
    """``step(obs, noise)`` samples actions without grad; ``evaluate_actions`` is the
    training pass.
    Greedy (``eval_mode``) means argmax / Gaussian mean."""

    def __init__(self, model: nn.Module, distribution: Any, action_space: gym.Space,
                 device: str | torch.device = "cpu"):
        self.model = model.to(device)
        self.distribution = distribution
        self.action_space = action_space
        self.device = torch.device(device)
        self.greedy = False

    @classmethod
    def build(cls, spaces: EnvSpaces, model: str = "auto", hidden: Sequence[int] = (64, 64),
              activation: str = "tanh", device: str = "cpu", algo: str = "ppo/a2c",
              normalize_obs: bool = False, obs_clip: float = 10.0,
              log_std_init: float = 0.0) -> "ActorCriticAgent":
        """Pick MLP or Nature-CNN from the observation space (``model='auto'``);
        ``normalize_obs`` feeds it running-mean/std normalized, clipped observations
        (statistics updated by the algorithm once per batch)."""
        if model not in MODELS:
            raise ValueError(f"model {model!r} unknown; choose from {MODELS}")
        dist = distribution_for(spaces.action, algo)
        obs_space = spaces.observation
        if not isinstance(obs_space, gym.spaces.Box):
            raise ValueError(f"observation space {obs_space} is not supported: use a Box")
        is_image = len(obs_space.shape) == 3 and obs_space.dtype == np.uint8
        kind = ("cnn" if is_image else "mlp") if model == "auto" else model
        gaussian_dim = dist.dim if isinstance(dist, DiagGaussian) else 0
        if kind == "cnn":
            net: nn.Module = CnnActorCritic(obs_space.shape, dist.n_params, gaussian_dim)
        else:
            net = MlpActorCritic(obs_space.shape, dist.n_params, hidden, activation, gaussian_dim,
                                 log_std_init)
        if normalize_obs:
            net = NormalizedModel(net, obs_space.shape, obs_clip)
        return cls(net, dist, spaces.action, device)

    @property
    def noise_shape(self) -> tuple[int, ...]:
        """Shape of the per-slot noise ``step`` consumes (uniforms or standard normals)."""
        return self.distribution.noise_shape

    @property
    def noise_kind(self) -> str:
        return "uniform" if isinstance(self.distribution, Categorical) else "normal"

    def _obs(self, obs: np.ndarray | torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(obs, device=self.device)

    @torch.no_grad()
    def step(self, obs: np.ndarray | torch.Tensor, noise: np.ndarray | torch.Tensor,
             slots: Sequence[int] | None = None) -> AgentStep:
        """Actions for ``obs`` from the slots' ``noise``; ``slots`` (which env slots the rows
        are) matters only to agents with per-slot behaviour, such as Ape-X exploration."""
        params, value = self.model(self._obs(obs))
        if self.greedy:
            action = self.distribution.greedy(params)
        else:
            noise_t = torch.as_tensor(noise, device=self.device, dtype=params.dtype)
            action = self.distribution.sample(params, noise_t)
        logp = self.distribution.log_prob(params, action)
        return AgentStep(action, AgentInfo(logp, value))

    @torch.no_grad()
    def value(self, obs: np.ndarray | torch.Tensor) -> torch.Tensor:
        return self.model(self._obs(obs))[1]

    def evaluate_actions(self, obs: torch.Tensor, action: torch.Tensor):
        """(log-prob of ``action``, entropy, value), with grad, for the loss."""
        params, value = self.model(obs)
        logp, entropy = self.distribution.log_prob_and_entropy(params, action)
        return logp, entropy, value

    def env_action(self, action: torch.Tensor) -> np.ndarray:
        """Buffer action -> what ``env.step`` accepts (Box actions clipped to bounds)."""
        act = action.cpu().numpy()
        if isinstance(self.action_space, gym.spaces.Box):
            act = np.clip(act, self.action_space.low, self.action_space.high)
        return act
