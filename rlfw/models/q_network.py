"""Q-networks for DQN: MLP or CNN torso, plain or dueling head, action values or (C51)
categorical return distributions over a fixed support."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rlfw.models.cnn import NatureCNN, SmallCNN, image_torso, model_kind
from rlfw.models.encoders import ObservationEncoder
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
        advantage: torch.Tensor = self.advantage(features)
        value: torch.Tensor = self.value(features)
        return value + advantage - advantage.mean(-1, keepdim=True)


class CategoricalHead(nn.Module):
    """Per-action logits over ``atoms`` return values (Bellemare et al., 2017); dueling:
    the value and advantage streams per atom, combined on the logits as Rainbow does."""

    def __init__(self, in_dim: int, n_actions: int, atoms: int, dueling: bool):
        super().__init__()
        self.n_actions, self.atoms = n_actions, atoms
        self.advantage = nn.Linear(in_dim, n_actions * atoms)
        self.value = nn.Linear(in_dim, atoms) if dueling else None

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.advantage(features).unflatten(-1, (self.n_actions, self.atoms))
        if self.value is not None:
            value: torch.Tensor = self.value(features)
            logits = value.unsqueeze(-2) + logits - logits.mean(-2, keepdim=True)
        return logits


class QNetwork(nn.Module):
    """``obs -> [..., n_actions]`` action values. Uint8 images get the CNN for their size
    (scaled inside); vectors an MLP with ReLU. With ``atoms > 1`` the head holds a
    categorical distribution of the return per action on ``atoms`` evenly spaced values
    from ``v_min`` to ``v_max`` (``log_distribution``); the action values are its means.
    ``encoder`` (an ``ObservationEncoder``) reads a nested observation into the MLP."""

    support: torch.Tensor  # the atoms' return values (C51 heads only)

    def __init__(
        self,
        obs_shape: Sequence[int],
        obs_dtype: npt.DTypeLike | None,
        n_actions: int,
        hidden: Sequence[int] = (256, 256),
        dueling: bool = False,
        model: str = "auto",
        atoms: int = 1,
        v_min: float = -10.0,
        v_max: float = 10.0,
        encoder: ObservationEncoder | None = None,
    ):
        super().__init__()
        # A nested observation's per-leaf encoder; its features are the MLP's input.
        self.encoder = encoder
        if encoder is not None:
            obs_shape, obs_dtype, model = (encoder.out_dim,), np.dtype(np.float32), "mlp"
        kind = model_kind(model, obs_shape, obs_dtype)
        if kind == "cnn":
            self.torso: NatureCNN | SmallCNN | MLP = image_torso(tuple(obs_shape))
            self.obs_ndim = 3
        else:
            self.torso = MLP(int(np.prod(obs_shape)), hidden, None, activation="relu")
            self.obs_ndim = len(obs_shape)
        width = self.torso.out_dim
        self.cnn = kind == "cnn"
        # The torso ends in its dense layer (Nature: 512, MinAtar: 128); dueling streams follow.
        self.atoms = atoms
        if atoms > 1:
            self.head: nn.Module = CategoricalHead(width, n_actions, atoms, dueling)
            self.register_buffer("support", torch.linspace(v_min, v_max, atoms))
        else:
            self.head = DuelingHead(width, n_actions) if dueling else nn.Linear(width, n_actions)

    def _head(self, obs: torch.Tensor) -> torch.Tensor:
        if self.encoder is not None:
            obs = self.encoder(obs)
        features = self.torso(obs) if self.cnn else self.torso(flatten_obs(obs, self.obs_ndim))
        out: torch.Tensor = self.head(features)
        return out

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        out = self._head(obs)
        if self.atoms > 1:  # the mean of each action's return distribution
            return (out.softmax(-1) * self.support).sum(-1)
        return out

    def log_distribution(self, obs: torch.Tensor) -> torch.Tensor:
        """``[..., n_actions, atoms]`` log-probabilities of the return (C51 heads only)."""
        if self.atoms == 1:
            raise ValueError("log_distribution needs a categorical head (atoms > 1)")
        return self._head(obs).log_softmax(-1)
