"""Action distributions that sample from *given* noise.

Samplers draw the noise from one RNG stream per env slot, so an action depends only on
(seed, slot, step), never on how slots are split across processes or batched.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Protocol, Sequence

import numpy as np
import torch
import torch.nn.functional as F


class Distribution(Protocol):
    """What ``ActorCriticAgent`` calls on its action distribution: ``params`` are the policy
    head's output, ``noise`` a sampler's per-slot draw of ``noise_shape`` (``noise_kind``
    'uniform' or 'normal')."""

    @property
    def noise_shape(self) -> tuple[int, ...]: ...

    @property
    def noise_kind(self) -> str: ...

    def sample(self, params: torch.Tensor, noise: torch.Tensor, /) -> torch.Tensor: ...

    def greedy(self, params: torch.Tensor, /) -> torch.Tensor: ...

    def log_prob(self, params: torch.Tensor, action: torch.Tensor, /) -> torch.Tensor: ...

    def log_prob_and_entropy(
        self, params: torch.Tensor, action: torch.Tensor, /
    ) -> tuple[torch.Tensor, torch.Tensor]: ...


class Categorical:
    """Discrete actions from logits; noise is one uniform in [0, 1) per sample."""

    noise_shape: tuple[int, ...] = ()
    noise_kind = "uniform"

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

    def log_prob_and_entropy(
        self, logits: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logp_all = F.log_softmax(logits, dim=-1)
        logp = logp_all.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
        return logp, -(logp_all.exp() * logp_all).sum(-1)


class MultiCategorical:
    """``MultiDiscrete`` actions: one categorical per head over its slice of the logits
    (``sum(nvec)`` in all), sampled from one uniform per head; the action's log-prob and
    the entropy are the heads' sums (the heads are independent given the state)."""

    noise_kind = "uniform"

    def __init__(self, nvec: list[int]):
        self.nvec = [int(n) for n in nvec]
        self.n_params = sum(self.nvec)
        self.noise_shape = (len(self.nvec),)

    def _heads(self, logits: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.split(logits, self.nvec, dim=-1)

    def sample(self, logits: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
        actions = []
        for i, head in enumerate(self._heads(logits)):
            cdf = torch.softmax(head, dim=-1).cumsum(-1)
            pick = (cdf < uniform[..., i : i + 1]).sum(-1).clamp_(max=self.nvec[i] - 1)
            actions.append(pick)
        return torch.stack(actions, dim=-1)

    def greedy(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.stack([head.argmax(-1) for head in self._heads(logits)], dim=-1)

    def log_prob_and_entropy(
        self, logits: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logp = torch.zeros(logits.shape[:-1], dtype=logits.dtype, device=logits.device)
        entropy = torch.zeros_like(logp)
        for i, head in enumerate(self._heads(logits)):
            logp_all = F.log_softmax(head, dim=-1)
            logp = logp + logp_all.gather(-1, action[..., i : i + 1].long()).squeeze(-1)
            entropy = entropy - (logp_all.exp() * logp_all).sum(-1)
        return logp, entropy

    def log_prob(self, logits: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.log_prob_and_entropy(logits, action)[0]

    def entropy(self, logits: torch.Tensor) -> torch.Tensor:
        heads = [Categorical(n).entropy(h) for n, h in zip(self.nvec, self._heads(logits))]
        return torch.stack(heads).sum(0)


class Bernoulli:
    """``MultiBinary`` actions: one independent Bernoulli per bit from its logit, sampled as
    ``uniform < sigmoid(logit)``; log-prob and entropy summed over the bits."""

    noise_kind = "uniform"

    def __init__(self, n: int):
        self.n = n
        self.n_params = n
        self.noise_shape = (n,)

    def sample(self, logits: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
        return (uniform < torch.sigmoid(logits)).long()

    def greedy(self, logits: torch.Tensor) -> torch.Tensor:
        return (logits > 0).long()

    def log_prob(self, logits: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        # log sigmoid(l) for ones, log sigmoid(-l) for zeros
        return -F.binary_cross_entropy_with_logits(
            logits, action.to(logits.dtype), reduction="none"
        ).sum(-1)

    def entropy(self, logits: torch.Tensor) -> torch.Tensor:
        p = torch.sigmoid(logits)
        return F.binary_cross_entropy_with_logits(logits, p, reduction="none").sum(-1)

    def log_prob_and_entropy(
        self, logits: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.log_prob(logits, action), self.entropy(logits)


class DiagGaussian:
    """Box actions; params are ``[mean, log_std]`` concatenated; noise is N(0, 1) per dim."""

    noise_kind = "normal"

    def __init__(self, dim: int):
        self.dim = dim
        self.n_params = dim  # the model adds the log-std half itself
        self.noise_shape = (dim,)

    def _split(self, params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return params[..., : self.dim], params[..., self.dim :]

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

    def log_prob_and_entropy(
        self, params: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.log_prob(params, action), self.entropy(params)


class StateDependentGaussian:
    """gSDE (generalized state-dependent exploration, Raffin, Kober & Stulp 2022, as SB3's
    ``use_sde``): Box actions ``mean + latent @ (std * noise)``, where ``latent`` are the
    policy's last hidden features and ``noise`` a standard-normal ``[latent_dim, dim]``
    matrix the sampler holds for several steps, so exploration is smooth in the state
    instead of fresh each step. Per action the distribution is a Gaussian of variance
    ``latent^2 @ std^2``. Params are ``[mean, latent, log_std]`` concatenated (``log_std``
    flattened from ``[latent_dim, dim]``); the model adds all but the mean itself."""

    noise_kind = "normal"

    def __init__(self, dim: int, latent_dim: int):
        self.dim, self.latent_dim = dim, latent_dim
        self.n_params = dim
        self.noise_shape = (latent_dim, dim)

    def _split(self, params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mean = params[..., : self.dim]
        latent = params[..., self.dim : self.dim + self.latent_dim]
        log_std = torch.unflatten(
            params[..., self.dim + self.latent_dim :], -1, (self.latent_dim, self.dim)
        )
        return mean, latent, log_std

    def _mean_and_std(self, params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, latent, log_std = self._split(params)
        variance = (latent.pow(2).unsqueeze(-1) * (2 * log_std).exp()).sum(-2)
        # SB3's epsilon: keeps the std (and log-prob) finite when every feature is 0
        return mean, (variance + 1e-6).sqrt()

    def sample(self, params: torch.Tensor, normal: torch.Tensor) -> torch.Tensor:
        mean, latent, log_std = self._split(params)
        return mean + (latent.unsqueeze(-1) * log_std.exp() * normal).sum(-2)

    def greedy(self, params: torch.Tensor) -> torch.Tensor:
        return params[..., : self.dim]

    @staticmethod
    def _log_prob(
        mean: torch.Tensor, std: torch.Tensor, log_std: torch.Tensor, action: torch.Tensor
    ) -> torch.Tensor:
        z = (action - mean) / std
        return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    @staticmethod
    def _entropy(log_std: torch.Tensor) -> torch.Tensor:
        return (log_std + 0.5 * (1.0 + math.log(2 * math.pi))).sum(-1)

    def log_prob(self, params: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        mean, std = self._mean_and_std(params)  # every env step: no entropy here
        return self._log_prob(mean, std, std.log(), action)

    def entropy(self, params: torch.Tensor) -> torch.Tensor:
        return self._entropy(self._mean_and_std(params)[1].log())

    def log_prob_and_entropy(
        self, params: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        mean, std = self._mean_and_std(params)
        log_std = std.log()
        return self._log_prob(mean, std, log_std, action), self._entropy(log_std)


def masked_logits(
    logits: torch.Tensor,
    mask: np.ndarray | torch.Tensor,
    heads: list[int] | None = None,
    slots: Sequence[int] | None = None,
) -> torch.Tensor:
    """``logits`` with invalid actions (``mask`` 0) at the dtype's lowest value: their
    probability is exactly 0 and they add nothing to a log-prob or an entropy. ``heads``
    (a MultiDiscrete's ``nvec``) checks each head keeps a valid action; a row with none is
    a ``ValueError`` naming its env slot (``slots``: the rows' slots, if known)."""
    valid = torch.as_tensor(mask, device=logits.device).to(torch.bool).expand_as(logits)
    blocks = torch.split(valid, heads, dim=-1) if heads else (valid,)
    empty = torch.stack([~block.any(-1) for block in blocks], dim=-1).any(-1)
    if bool(empty.any()):
        row = int(torch.nonzero(empty.reshape(-1))[0])
        where = f"env slot {list(slots)[row]}" if slots is not None else f"row {row}"
        raise ValueError(
            f"{where} has no valid action: its action mask is all zero"
            + (" in a head" if heads and len(heads) > 1 else "")
            + "; an env must leave at least one action valid (per head) at every step"
        )
    return logits.masked_fill(~valid, torch.finfo(logits.dtype).min)


def keep_valid(logits: torch.Tensor, action: torch.Tensor, heads: list[int] | None) -> torch.Tensor:
    """``action`` where it is valid under ``masked_logits``; the greedy action where
    rounding in the inverse CDF picked a masked one (its probability is 0, so only a
    cumulative sum short of 1 can reach it)."""
    lowest = torch.finfo(logits.dtype).min
    if heads is None:
        picked = logits.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        return torch.where(picked == lowest, logits.argmax(-1), action)
    out = []
    for i, head in enumerate(torch.split(logits, heads, dim=-1)):
        a = action[..., i]
        picked = head.gather(-1, a.unsqueeze(-1)).squeeze(-1)
        out.append(torch.where(picked == lowest, head.argmax(-1), a))
    return torch.stack(out, dim=-1)


def mask_values(values: torch.Tensor, observation: Mapping[str, Any]) -> torch.Tensor:
    """Action values (or logits) of a learner's batch with invalid actions at the lowest
    value, read from ``observation['action_mask']``; rows without a valid action (a
    terminal state's, whose value is never used) stay as they are."""
    valid = observation["action_mask"].to(torch.bool)
    valid = valid | ~valid.any(-1, keepdim=True)
    return values.masked_fill(~valid, torch.finfo(values.dtype).min)
