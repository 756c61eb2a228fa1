"""Fully connected networks."""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}
_ACTIVATION_FUNCTIONS = {"tanh": torch.tanh, "relu": torch.relu}
# over their input; autograd allows it on a layer's fresh output (the backward reads the result)
INPLACE_ACTIVATIONS = {"tanh": torch.tanh_, "relu": torch.relu_}


def orthogonal_init(module: nn.Module, gain: float) -> nn.Module:
    """Orthogonal weights and zero biases: the init PPO/A2C results are reported with."""
    for layer in module.modules():
        if isinstance(layer, (nn.Linear, nn.Conv2d)):
            nn.init.orthogonal_(layer.weight, gain)
            if layer.bias is not None:  # a layer built with bias=False has none to zero
                nn.init.zeros_(layer.bias)
    return module


class MLP(nn.Sequential):
    """``in_dim -> hidden... -> out_dim`` (no output activation when ``out_dim`` is given)."""

    def __init__(
        self,
        in_dim: int,
        hidden: Sequence[int],
        out_dim: int | None = None,
        activation: str = "tanh",
    ):
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation {activation!r} unknown; choose from {sorted(ACTIVATIONS)}"
            )
        layers: list[nn.Module] = []
        last = in_dim
        for width in hidden:
            layers += [nn.Linear(last, width), ACTIVATIONS[activation]()]
            last = width
        if out_dim is not None:
            layers.append(nn.Linear(last, out_dim))
            last = out_dim
        super().__init__(*layers)
        self.out_dim = last
        self._activation = _ACTIVATION_FUNCTIONS[activation]
        # the Linear layers in order (a plain tuple: they are registered once, above), and
        # whether the last one is followed by the activation too (no output layer)
        self._linears = tuple(layer for layer in self if isinstance(layer, nn.Linear))
        self._activate_last = out_dim is None
        orthogonal_init(self, gain=2**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The layers' own functions on their parameters: a module call costs a few us of
        # Python, a tenth of a small MLP's forward pass at the batch sizes samplers act on.
        if not self._linears:
            return x
        act = self._activation
        *hidden, last = self._linears
        for layer in hidden:
            x = act(F.linear(x, layer.weight, layer.bias))
        x = F.linear(x, last.weight, last.bias)
        return act(x) if self._activate_last else x


def flatten_obs(obs: torch.Tensor, obs_ndim: int) -> torch.Tensor:
    """Merge the observation's own dims into one feature dim, keeping leading batch dims.
    uint8 values are pixels (rlfw's convention, which the CNNs share) and are scaled to
    [0, 1]: an MLP fed 0..255 saturates from the first update."""
    flat = obs.reshape(*obs.shape[: obs.dim() - obs_ndim], -1)
    if flat.dtype == torch.uint8:
        return flat.float().mul_(1.0 / 255.0)
    return flat.float()
