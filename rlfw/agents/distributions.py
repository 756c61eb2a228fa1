"""Action distributions that sample from *given* noise.

Samplers draw the noise from one RNG stream per env slot, so an action depends only on
(seed, slot, step), never on how slots are split across processes or batched.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


class Categorical:
    """Discrete actions from logits; noise is one uniform in [0, 1) per sample."""

    noise_shape: tuple[int, ...] = ()

    def __init__(self, n: int):
        self.n = n
        self.n_params = n

    def sample(self, logits: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
        cdf = torch.softmax(logits, dim=-1).cumsum(-1)
        # Inverse CDF; clamp guards the case where rounding leaves cdf[-1] < u.
        return (cdf < uniform.unsqueeze(-1)).sum(-1).clamp_(max=self.n - 1)

    def greedy(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.argmax(-1)

    def log_prob(self, logits: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(logits, dim=-1).gather(-1, action.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self, logits: torch.Tensor) -> torch.Tensor:
        logp = F.log_softmax(logits, dim=-1)
        return -(logp.exp() * logp).sum(-1)

    def log_prob_and_entropy(self, logits: torch.Tensor, action: torch.Tensor):
        logp_all = F.log_softmax(logits, dim=-1)
        logp = logp_all.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
        return logp, -(logp_all.exp() * logp_all).sum(-1)


class DiagGaussian:
    """Box actions; params are ``[mean, log_std]`` concatenated; noise is N(0, 1) per dim."""

    def __init__(self, dim: int):
        self.dim = dim
        self.n_params = dim  # the model adds the log-std half itself
        self.noise_shape = (dim,)

    def _split(self, params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return params[..., : self.dim], params[..., self.dim:]

    def sample(self, params: torch.Tensor, normal: torch.Tensor) -> torch.Tensor:
        mean, log_std = self._split(params)
        return mean + log_std.exp() * normal

    def greedy(self, params: torch.Tensor) -> torch.Tensor:
        return self._split(params)[0]

    def log_prob(self, params: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        mean, log_std = self._split(params)
        z = (action - mean) * torch.exp(-log_std)
        return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    def entropy(self, params: torch.Tensor) -> torch.Tensor:
        _, log_std = self._split(params)
        return (log_std + 0.5 * (1.0 + math.log(2 * math.pi))).sum(-1)

    def log_prob_and_entropy(self, params: torch.Tensor, action: torch.Tensor):
        return self.log_prob(params, action), self.entropy(params)
