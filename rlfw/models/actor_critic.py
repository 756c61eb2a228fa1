"""Policy-and-value networks for PPO/A2C: ``forward(obs) -> (policy_params, value)``."""

from __future__ import annotations

from typing import Mapping, Sequence, cast

import numpy as np
import torch
from torch import nn

from rlfw.models.cnn import image_torso
from rlfw.models.mlp import MLP, flatten_obs, orthogonal_init


class MlpActorCritic(nn.Module):
    """Separate policy and value MLPs (as in SB3/CleanRL for vector observations).

    ``sde`` (with ``gaussian_dim``): the policy params are gSDE's (``StateDependentGaussian``):
    the mean, then the policy's last hidden features, detached (as SB3's default: the noise
    scale does not train the features), then a ``[latent_dim, gaussian_dim]`` log-std."""

    def __init__(
        self,
        obs_shape: Sequence[int],
        n_policy_params: int,
        hidden: Sequence[int] = (64, 64),
        activation: str = "tanh",
        gaussian_dim: int = 0,
        log_std_init: float = 0.0,
        ortho_init: bool = True,
        sde: bool = False,
    ):
        super().__init__()
        if sde and not gaussian_dim:
            raise ValueError("sde needs a Gaussian policy (gaussian_dim > 0)")
        in_dim = int(torch.tensor(obs_shape).prod())
        self.obs_ndim = len(obs_shape)
        self.pi = MLP(in_dim, hidden, n_policy_params, activation)
        self.v = MLP(in_dim, hidden, 1, activation)
        if ortho_init:
            orthogonal_init(self.pi[-1], 0.01)  # near-uniform initial policy
            orthogonal_init(self.v[-1], 1.0)
        else:  # PyTorch's default (Kaiming-uniform) for every layer, as SB3 without it
            for layer in self.modules():
                if isinstance(layer, nn.Linear):
                    layer.reset_parameters()
        self.sde = sde
        self._pi_body = tuple(self.pi)[:-1]  # the layers before the head (a plain tuple:
        # the modules are registered once, under ``pi``)
        # State-independent log-std for Gaussian policies (0 params for Discrete); gSDE's
        # has one per (last hidden feature, action).
        head = cast(nn.Linear, self.pi[-1])  # an MLP given out_dim ends in that Linear
        std_shape = (head.in_features, gaussian_dim) if sde else (gaussian_dim,)
        self.log_std = (
            nn.Parameter(torch.full(std_shape, float(log_std_init))) if gaussian_dim else None
        )

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = flatten_obs(obs, self.obs_ndim)
        if self.sde:
            latent = x
            for layer in self._pi_body:
                latent = layer(latent)
            mean = self.pi[-1](latent)
            # sde needs gaussian_dim > 0 (``__init__``): the log-std is there
            log_std = cast(nn.Parameter, self.log_std).flatten().expand(*mean.shape[:-1], -1)
            params = torch.cat([mean, latent.detach(), log_std], dim=-1)
        else:
            params = self.pi(x)
            if self.log_std is not None:
                params = torch.cat([params, self.log_std.expand_as(params)], dim=-1)
        return params, self.v(x).squeeze(-1)


class CentralCriticActorCritic(nn.Module):
    """MAPPO's actor-critic (Yu et al. 2022): the policy MLP reads the agent's own
    observation (leaf ``observation``), the value MLP the env's global state (``state``)
    with the agent's one-hot index (``agent``): one critic, shared by every agent, that
    values the whole env from each agent's seat. Execution needs the policy alone."""

    def __init__(
        self,
        obs_shape: Sequence[int],
        state_shape: Sequence[int],
        n_agents: int,
        n_policy_params: int,
        hidden: Sequence[int] = (64, 64),
        activation: str = "tanh",
        gaussian_dim: int = 0,
        log_std_init: float = 0.0,
    ):
        super().__init__()
        self.obs_ndim, self.state_ndim = len(obs_shape), len(state_shape)
        obs_dim, state_dim = int(np.prod(obs_shape)), int(np.prod(state_shape))
        self.pi = MLP(obs_dim, hidden, n_policy_params, activation)
        self.v = MLP(state_dim + n_agents, hidden, 1, activation)
        orthogonal_init(self.pi[-1], 0.01)  # near-uniform initial policy
        orthogonal_init(self.v[-1], 1.0)
        self.log_std = (
            nn.Parameter(torch.full((gaussian_dim,), float(log_std_init))) if gaussian_dim else None
        )

    def forward(self, obs: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        params = self.pi(flatten_obs(obs["observation"], self.obs_ndim))
        if self.log_std is not None:
            params = torch.cat([params, self.log_std.expand_as(params)], dim=-1)
        state = flatten_obs(obs["state"], self.state_ndim)
        value = self.v(torch.cat([state, obs["agent"].float()], dim=-1))
        return params, value.squeeze(-1)


class CnnActorCritic(nn.Module):
    """A CNN torso (Nature's for Atari frames, MinAtar's for small images) shared by a
    policy head and a value head (PPO Atari setup)."""

    def __init__(
        self,
        obs_shape: Sequence[int],
        n_policy_params: int,
        gaussian_dim: int = 0,
        log_std_init: float = 0.0,
        channels_last: bool = True,
    ):
        super().__init__()
        self.torso = image_torso(tuple(obs_shape), channels_last=channels_last)
        self.pi = orthogonal_init(nn.Linear(self.torso.out_dim, n_policy_params), 0.01)
        self.v = orthogonal_init(nn.Linear(self.torso.out_dim, 1), 1.0)
        self.log_std = (
            nn.Parameter(torch.full((gaussian_dim,), float(log_std_init))) if gaussian_dim else None
        )

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.torso(obs)
        params = self.pi(features)
        if self.log_std is not None:
            params = torch.cat([params, self.log_std.expand_as(params)], dim=-1)
        return params, self.v(features).squeeze(-1)
