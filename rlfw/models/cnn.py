"""The Nature-DQN convolutional torso (Mnih et al., 2015)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rlfw.models.mlp import orthogonal_init


class NatureCNN(nn.Module):
    """``[..., C, 84, 84]`` uint8 frames -> ``[..., 512]`` features; scaling to [0, 1] is done
    here so frames travel through samplers and buffers as compact uint8. ``channels_last``
    runs the convolutions in NHWC layout (weights and activations)."""

    def __init__(
        self,
        in_channels: int = 4,
        screen_size: int = 84,
        features: int = 512,
        channels_last: bool = True,
    ):
        super().__init__()
        self.channels_last = channels_last
        self.convs = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            n_flat = self.convs(torch.zeros(1, in_channels, screen_size, screen_size)).shape[1]
        self.fc = nn.Sequential(nn.Linear(n_flat, features), nn.ReLU())
        self.out_dim = features
        orthogonal_init(self, gain=2**0.5)
        if channels_last:  # oneDNN/cuDNN convolutions run faster in NHWC (measured)
            # Module.to takes memory_format at runtime; torch's overloads leave it out
            self.convs.to(memory_format=torch.channels_last)  # type: ignore[call-overload]

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        lead = frames.shape[:-3]
        x = frames.reshape(-1, *frames.shape[-3:])
        if self.channels_last:  # laid out as uint8, a quarter of the bytes of the floats
            x = x.contiguous(memory_format=torch.channels_last)
        x = x.float().mul_(1.0 / 255.0)
        features: torch.Tensor = self.fc(self.convs(x))
        return features.reshape(*lead, -1)


# Below this height or width the Nature CNN's 8x8/4, 4x4/2, 3x3/1 stack has no output left.
NATURE_MIN_SIZE = 36


class SmallCNN(nn.Module):
    """MinAtar's reference network torso (Young & Tian, 2019): one 3x3 convolution with 16
    filters, stride 1, ReLU, then ``features`` ReLU units; ``[..., C, H, W]`` uint8 images
    scaled to [0, 1] here, as the Nature CNN does."""

    def __init__(self, obs_shape: tuple[int, ...], filters: int = 16, features: int = 128):
        super().__init__()
        channels, height, width = obs_shape
        self.convs = nn.Sequential(
            nn.Conv2d(channels, filters, 3, stride=1), nn.ReLU(), nn.Flatten()
        )
        n_flat = filters * (height - 2) * (width - 2)
        self.fc = nn.Sequential(nn.Linear(n_flat, features), nn.ReLU())
        self.out_dim = features
        orthogonal_init(self, gain=2**0.5)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        lead = frames.shape[:-3]
        x = frames.reshape(-1, *frames.shape[-3:]).float().mul_(1.0 / 255.0)
        features: torch.Tensor = self.fc(self.convs(x))
        return features.reshape(*lead, -1)


# The network kinds a run may ask for: 'auto' picks by the observations (``model_kind``).
MODELS = ("auto", "mlp", "cnn")


def check_model(model: str) -> None:
    if model not in MODELS:
        raise ValueError(f"model {model!r} unknown; choose from {MODELS}")


def model_kind(model: str, obs_shape: Sequence[int], obs_dtype: npt.DTypeLike | None) -> str:
    """'cnn' or 'mlp': ``model`` itself, or for 'auto' a CNN for uint8 ``[C, H, W]``
    images and an MLP for anything else."""
    check_model(model)
    if model != "auto":
        return model
    return "cnn" if len(obs_shape) == 3 and np.dtype(obs_dtype) == np.uint8 else "mlp"


def image_torso(obs_shape: tuple[int, ...], channels_last: bool = True) -> NatureCNN | SmallCNN:
    """The convolutional torso for ``[C, H, W]`` uint8 images, chosen by their size: the
    Nature CNN for Atari-sized frames (square, at least ``NATURE_MIN_SIZE``), the small one
    (MinAtar's) for anything smaller. Either has ``out_dim``."""
    if len(obs_shape) != 3:
        raise ValueError(
            f"model 'cnn' needs [C, H, W] image observations, got shape "
            f"{tuple(obs_shape)}; use model 'mlp' or 'auto'"
        )
    channels, height, width = obs_shape
    if min(height, width) < NATURE_MIN_SIZE:
        if min(height, width) < 3:
            raise ValueError(
                f"images of {height}x{width} are too small for a 3x3 "
                f"convolution (observation shape {tuple(obs_shape)})"
            )
        return SmallCNN(tuple(obs_shape))
    if height != width:
        raise ValueError(f"CNN expects square frames, got observation shape {tuple(obs_shape)}")
    return NatureCNN(channels, height, channels_last=channels_last)
