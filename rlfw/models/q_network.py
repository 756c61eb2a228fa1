"""Q-networks for DQN: MLP or CNN torso, plain or dueling head, action values or (C51)
categorical return distributions over a fixed support; optionally a LayerNorm before each
hidden ReLU (PQN's network)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from torch import nn

from rlfw.models.cnn import NatureCNN, SmallCNN, image_torso, model_kind
from rlfw.models.encoders import ObservationEncoder
from rlfw.models.mlp import MLP, flatten_obs, orthogonal_init


class FeatureNorm(nn.LayerNorm):
    """torch's LayerNorm over the last dim, as a class of rlfw's: it computes the same in
    train and eval mode, and ``rlfw.agents.base.modes_matter`` takes rlfw's modules at
    their word, so an agent need not switch modes around every batch for it."""


class ChannelNorm(FeatureNorm):
    """LayerNorm over the channels at each position of ``[N, C, H, W]`` feature maps: what
    a LayerNorm over the last axis of a channels-last convolution's output does in
    purejaxql's PQN CNNs (Gallici et al. 2024)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class LayerNormMLP(nn.Module):
    """``in_dim -> hidden...`` with Linear -> LayerNorm -> ReLU per layer (PQN's MLP:
    purejaxql's and CleanRL's pqn.py), orthogonal weights as ``MLP``'s; ``out_dim`` is the
    last width (the input's, with no hidden layer)."""

    def __init__(self, in_dim: int, hidden: Sequence[int]):
        super().__init__()
        widths = [in_dim, *hidden]
        linears = [nn.Linear(a, b) for a, b in zip(widths, widths[1:])]
        norms = [FeatureNorm(width) for width in hidden]
        self.linears, self.norms = nn.ModuleList(linears), nn.ModuleList(norms)
        # the layers in order, typed (a plain tuple: registered once, in the lists above)
        self._layers = tuple(zip(linears, norms))
        self.out_dim = widths[-1]
        orthogonal_init(self.linears, gain=2**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for linear, norm in self._layers:
            x = torch.relu(norm(F.linear(x, linear.weight, linear.bias)))
        return x


class LayerNormImageTorso(nn.Module):
    """An image torso of ``image_torso``'s (its layers and their initialization) with a
    LayerNorm before each ReLU: over the channels after each convolution, over the
    features after the dense layer, as purejaxql's PQN CNNs place them. CleanRL's
    pqn_atari_envpool.py normalizes each convolution's whole ``[C, H, W]`` output instead."""

    def __init__(self, torso: NatureCNN | SmallCNN):
        super().__init__()
        self.torso = torso
        # the torso's layers in order (plain tuples: registered once, inside the torso)
        self._convs = tuple(m for m in torso.convs if isinstance(m, nn.Conv2d))
        self._dense = tuple(m for m in torso.fc if isinstance(m, nn.Linear))  # its one
        self.conv_norms = nn.ModuleList(ChannelNorm(c.out_channels) for c in self._convs)
        self.fc_norm = FeatureNorm(torso.out_dim)
        self.out_dim = torso.out_dim

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        lead = frames.shape[:-3]
        x = frames.reshape(-1, *frames.shape[-3:])
        if getattr(self.torso, "channels_last", False):  # the layout its convolutions run in
            x = x.contiguous(memory_format=torch.channels_last)
        x = x.float().mul_(1.0 / 255.0)
        for conv, norm in zip(self._convs, self.conv_norms):
            x = torch.relu(norm(conv(x)))
        (dense,) = self._dense
        x = torch.relu(self.fc_norm(F.linear(x.flatten(1), dense.weight, dense.bias)))
        return x.reshape(*lead, -1)


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
    ``encoder`` (an ``ObservationEncoder``) reads a nested observation into the MLP.
    ``layer_norm``: a LayerNorm before each hidden ReLU (``LayerNormMLP``,
    ``LayerNormImageTorso``), as PQN's network has."""

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
        layer_norm: bool = False,
    ):
        super().__init__()
        # A nested observation's per-leaf encoder; its features are the MLP's input.
        self.encoder = encoder
        if encoder is not None:
            obs_shape, obs_dtype, model = (encoder.out_dim,), np.dtype(np.float32), "mlp"
        kind = model_kind(model, obs_shape, obs_dtype)
        self.torso: NatureCNN | SmallCNN | MLP | LayerNormImageTorso | LayerNormMLP
        if kind == "cnn":
            image = image_torso(tuple(obs_shape))
            self.torso = LayerNormImageTorso(image) if layer_norm else image
            self.obs_ndim = 3
        elif layer_norm:
            self.torso = LayerNormMLP(int(np.prod(obs_shape)), hidden)
            self.obs_ndim = len(obs_shape)
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
