"""Networks of the Q-function policy-gradient family (SAC, TD3, DDPG): actors for Box
actions in ``[-1, 1]`` and an ensemble of Q-functions evaluated as one batched call.

Every network reads observations through an ``ObservationEncoder`` (a flat Box is one
flattened leaf; a Dict's leaves are encoded and concatenated), so goal-conditioned and
nested observations need nothing of their own.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from rlfw.models.encoders import ObservationEncoder
from rlfw.models.mlp import INPLACE_ACTIVATIONS
from rlfw.models.normalize import ObservationNormalizer, TreeNormalizer

# SB3's and CleanRL's bounds on the squashed Gaussian's log-std.
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


class InplaceActivation(nn.Module):
    """``relu`` or ``tanh`` written over a layer's fresh output: both backward passes read
    the result only, so autograd allows it, and the next layer reads memory still in cache
    instead of a second activation-sized buffer (an update at 256 x 256 is bound by that
    traffic as much as by its matmuls)."""

    def __init__(self, activation: str):
        super().__init__()
        if activation not in INPLACE_ACTIVATIONS:
            raise ValueError(
                f"activation {activation!r} unknown; choose from {sorted(INPLACE_ACTIVATIONS)}"
            )
        self.name = activation
        self.function = INPLACE_ACTIVATIONS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(x)

    def extra_repr(self) -> str:
        return self.name


def plain_mlp(in_dim: int, hidden: Sequence[int], activation: str) -> nn.Sequential:
    """Hidden layers with PyTorch's default initialization, as SB3's off-policy networks
    have (the orthogonal init of ``MLP`` is the on-policy literature's)."""
    act = InplaceActivation(activation)  # stateless: one instance serves every layer
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_dim, width), act]
        in_dim = width
    return nn.Sequential(*layers)


class EnsembleLinear(nn.Module):
    """``members`` independent linear layers as one batched matmul: ``[N, in]`` (the same
    input for every member) or ``[E, N, in]`` -> ``[E, N, out]``. Each member is
    initialized as ``nn.Linear`` would be."""

    def __init__(self, members: int, in_features: int, out_features: int):
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(
            torch.empty(members, in_features, out_features).uniform_(-bound, bound)
        )
        self.bias = nn.Parameter(torch.empty(members, 1, out_features).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor, member: int | None = None) -> torch.Tensor:
        """Every member's output, or (``member``) that one member's ``[N, out]`` alone."""
        if member is not None:
            return torch.addmm(self.bias[member], x, self.weight[member])
        if x.dim() == 2:
            # a stride-0 view, not matmul's broadcast: that copies the [E, N, out] result
            # out of a transposed layout and adds the bias in a second pass
            x = x.expand(self.weight.shape[0], *x.shape)
        return torch.baddbmm(self.bias, x, self.weight)


class CriticEnsemble(nn.Module):
    """``members`` Q-functions Q_i(obs, action) -> ``[E, N]``: one encoder, then MLPs whose
    weights are stacked, so the twin critics of SAC/TD3 cost one forward and one backward
    pass, not two."""

    def __init__(
        self,
        encoder: ObservationEncoder,
        action_dim: int,
        hidden: Sequence[int],
        members: int = 2,
        activation: str = "relu",
    ):
        super().__init__()
        self.activation = InplaceActivation(activation)
        self.encoder, self.members = encoder, members
        widths = [encoder.out_dim + action_dim, *hidden, 1]
        self.layers = nn.ModuleList(
            EnsembleLinear(members, a, b) for a, b in zip(widths[:-1], widths[1:])
        )

    def forward(self, obs: Any, action: torch.Tensor, member: int | None = None) -> torch.Tensor:
        """Every member's Q ``[E, N]``, or (``member``) that member's ``[N]`` alone: TD3's
        actor learns from the first critic only, so it need not pay for the others."""
        x = torch.cat([self.encoder(obs), action], dim=-1)
        for i, layer in enumerate(self.layers):
            x = layer(x, member)
            if i < len(self.layers) - 1:
                x = self.activation(x)
        return x.squeeze(-1)


class SquashedGaussianActor(nn.Module):
    """SAC's policy: a Gaussian over pre-squash actions, ``tanh`` into ``[-1, 1]``; the
    log-probability carries the change of variables."""

    def __init__(
        self,
        encoder: ObservationEncoder,
        action_dim: int,
        hidden: Sequence[int],
        activation: str = "relu",
    ):
        super().__init__()
        self.encoder = encoder
        self.trunk = plain_mlp(encoder.out_dim, hidden, activation)
        last = hidden[-1] if hidden else encoder.out_dim
        self.mu = nn.Linear(last, action_dim)
        self.log_std = nn.Linear(last, action_dim)

    def distribution(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, log-std) of the pre-squash Gaussian."""
        latent = self.trunk(self.encoder(obs))
        log_std = self.log_std(latent).clamp(LOG_STD_MIN, LOG_STD_MAX)
        return self.mu(latent), log_std

    def sample(self, obs: Any, normal: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(action, its log-probability) drawn with the standard-normal ``normal``
        (reparameterized: gradients flow to the mean and log-std)."""
        mean, log_std = self.distribution(obs)
        pre = mean + log_std.exp() * normal
        logp = (-0.5 * normal.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        return _squash(pre, logp)

    def mean_action(self, obs: Any) -> torch.Tensor:
        return torch.tanh(self.distribution(obs)[0])

    def explore(self, obs: Any, normal: torch.Tensor) -> torch.Tensor:
        return self.sample(obs, normal)[0]


def _squash(pre: torch.Tensor, logp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``tanh(pre)`` and the log-probability with tanh's change of variables, in a form of
    log(1 - tanh(u)^2) that stays finite for large |u|."""
    logp = logp - (2 * (math.log(2) - pre - F.softplus(-2 * pre))).sum(-1)
    return torch.tanh(pre), logp


class SdeSquashedGaussianActor(nn.Module):
    """SAC's policy with gSDE exploration (SB3's ``use_sde`` for SAC): the pre-squash
    action is ``mean + latent @ (std * noise)``, where ``latent`` is the trunk's output and
    ``noise`` a standard-normal ``[latent_dim, action_dim]`` matrix the sampler holds for
    ``sde_sample_freq`` steps, so exploration varies smoothly with the state. Per action it
    is a Gaussian of variance ``latent^2 @ std^2``; ``std`` is a learned ``[latent_dim,
    action_dim]`` parameter (``exp(log_std)``, or SB3's ``expln``, which grows linearly
    above 0); the mean is clipped to ``[-clip_mean, clip_mean]`` as SB3's (2.0)."""

    def __init__(
        self,
        encoder: ObservationEncoder,
        action_dim: int,
        hidden: Sequence[int],
        activation: str = "relu",
        log_std_init: float = -3.0,
        expln: bool = False,
        clip_mean: float = 2.0,
    ):
        super().__init__()
        self.encoder = encoder
        self.trunk = plain_mlp(encoder.out_dim, hidden, activation)
        last = hidden[-1] if hidden else encoder.out_dim
        self.mu = nn.Linear(last, action_dim)
        self.log_std = nn.Parameter(torch.full((last, action_dim), float(log_std_init)))
        self.expln, self.clip_mean = expln, clip_mean
        self.noise_shape = (last, action_dim)

    def std(self) -> torch.Tensor:
        if not self.expln:
            return self.log_std.exp()
        # SB3's expln: exp below 0, log1p + 1 above (the two meet at 0 with value 1)
        above = self.log_std > 0
        return torch.where(above, torch.log1p(self.log_std.clamp(min=0)) + 1, self.log_std.exp())

    def _mean_and_latent(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        latent = self.trunk(self.encoder(obs))
        return self.mu(latent).clamp(-self.clip_mean, self.clip_mean), latent

    def sample(self, obs: Any, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(action, its log-probability) for the noise matrix ``noise``: one ``[latent,
        A]`` for every row (an update's, as SB3 draws one per gradient step) or one per
        row ``[..., latent, A]`` (the envs' held matrices). Reparameterized: gradients
        reach the mean, the features and the std."""
        mean, latent = self._mean_and_latent(obs)
        std = self.std()
        scaled = std * noise
        if noise.dim() == 2:
            offset = latent @ scaled
        else:
            offset = (latent.unsqueeze(-1) * scaled).sum(-2)
        pre = mean + offset
        # SB3's epsilon keeps the std finite where every feature is 0
        action_std = (latent.pow(2) @ std.pow(2) + 1e-6).sqrt()
        z = offset / action_std
        logp = (-0.5 * z.pow(2) - action_std.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
        return _squash(pre, logp)

    def mean_action(self, obs: Any) -> torch.Tensor:
        return torch.tanh(self._mean_and_latent(obs)[0])

    def explore(self, obs: Any, noise: torch.Tensor) -> torch.Tensor:
        return self.sample(obs, noise)[0]


class DeterministicActor(nn.Module):
    """TD3's and DDPG's policy: ``tanh`` of an MLP; exploration adds Gaussian noise of
    standard deviation ``noise_std`` (in the ``[-1, 1]`` units) and clips."""

    def __init__(
        self,
        encoder: ObservationEncoder,
        action_dim: int,
        hidden: Sequence[int],
        activation: str = "relu",
        noise_std: float = 0.1,
    ):
        super().__init__()
        self.encoder = encoder
        self.trunk = plain_mlp(encoder.out_dim, hidden, activation)
        self.mu = nn.Linear(hidden[-1] if hidden else encoder.out_dim, action_dim)
        self.noise_std = noise_std

    def mean_action(self, obs: Any) -> torch.Tensor:
        return torch.tanh(self.mu(self.trunk(self.encoder(obs))))

    def explore(self, obs: Any, normal: torch.Tensor) -> torch.Tensor:
        return (self.mean_action(obs) + self.noise_std * normal).clamp(-1.0, 1.0)


class ActorAndCritics(nn.Module):
    """What a Q-function policy-gradient agent ships to sampler workers: the actor, the
    critics (``Agent.value`` bootstraps with them), whether actions are still the warm-up's
    uniform ones (a buffer, so it travels with the weights) and, with ``normalize_obs``, the
    observation statistics every network's input is standardized by (one set, applied by
    the agent and the learner before any network, so the target networks see the same)."""

    actor: nn.Module
    critics: CriticEnsemble
    warmup: torch.Tensor

    def __init__(
        self, actor: nn.Module, critics: CriticEnsemble, normalizer: nn.Module | None = None
    ):
        super().__init__()
        self.actor, self.critics = actor, critics
        self.normalizer = normalizer
        self.register_buffer("warmup", torch.ones((), dtype=torch.bool))

    def normalize(self, obs: Any) -> Any:
        """``obs`` standardized by the running statistics (unchanged without them)."""
        return obs if self.normalizer is None else self.normalizer(obs)

    def update_normalization(self, rows: Any) -> None:
        """Merge raw observation rows (``[N, ...]`` per leaf) into the statistics."""
        if isinstance(self.normalizer, TreeNormalizer):
            self.normalizer.update(rows)
        elif isinstance(self.normalizer, ObservationNormalizer):
            self.normalizer.stats.update(rows)
