"""Q-networks for DQN: MLP or Nature-CNN torso, plain or dueling head."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from rlfw.models.cnn import image_torso
from rlfw.models.mlp import MLP, flatten_obs


class DuelingHead(nn.Module):
    """Q = V + A - mean(A) (Wang et al., 2016): the mean keeps V and A identifiable."""

    def __init__(self, in_dim: int, n_actions: int, hidden: int = 0):
        super().__init__()
        def stream(out: int) -> nn.Module:
            if hidden:
                return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, out))
            return nn.Linear(in_dim, out)
        self.value, self.advantage = stream(1), stream(n_actions)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        advantage = self.advantage(features)
        return self.value(features) + advantage - advantage.mean(-1, keepdim=True)


class QNetwork(nn.Module):
    """``obs -> [..., n_actions]`` action values. Uint8 images get the CNN for their size
    (scaled inside); vectors an MLP with ReLU."""

    def __init__(self, obs_shape: Sequence[int], obs_dtype: np.dtype, n_actions: int,
                 hidden: Sequence[int] = (256, 256), dueling: bool = False,
                 model: str = "auto"):
        super().__init__()
        is_image = len(obs_shape) == 3 and np.dtype(obs_dtype) == np.uint8
        kind = ("cnn" if is_image else "mlp") if model == "auto" else model
        if kind == "cnn":
            self.torso: nn.Module = image_torso(tuple(obs_shape))
            self.obs_ndim = 3
        else:
            self.torso = MLP(int(np.prod(obs_shape)), hidden, None, activation="relu")
            self.obs_ndim = len(obs_shape)
        width = self.torso.out_dim
        self.cnn = kind == "cnn"
        # The torso ends in its dense layer (Nature: 512, MinAtar: 128); dueling streams follow.
        self.head = DuelingHead(width, n_actions) if dueling else nn.Linear(width, n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        features = self.torso(obs) if self.cnn else self.torso(flatten_obs(obs, self.obs_ndim))
        return self.head(features)
