"""Recurrent actor-critics: features (MLP or Nature CNN) -> LSTM/GRU core -> policy and
value heads (CleanRL's ``ppo_atari_lstm`` layout for images: CNN -> 512 -> LSTM -> heads).

The recurrent state travels as one flat ``[n, state_size]`` tensor per env slot (LSTM:
``h`` then ``c``; GRU: ``h``), so samplers store, reset and ship it like any other array
without knowing which core made it. ``forward`` takes one step for ``n`` slots (what a
sampler calls); ``forward_sequence`` runs ``[T, n]`` sequences from their initial states
with the library's fused kernels, restarting from zeros where an episode starts (what the
learner calls).
"""

from __future__ import annotations

from typing import Sequence, cast

import torch
from torch import nn

from rlfw.models.cnn import NatureCNN, SmallCNN, image_torso
from rlfw.models.mlp import MLP, flatten_obs, orthogonal_init
from rlfw.models.settings import MODEL_DEFAULTS

CORES = ("lstm", "gru")


def check_core(kind: str | None) -> None:
    """The recurrent-core rule, worded once: ``kind`` is one of ``CORES`` or None
    (feed-forward)."""
    if kind is not None and kind not in CORES:
        raise ValueError(f"recurrent must be one of {CORES} or none (feed-forward), got {kind!r}")


class RecurrentCore(nn.Module):
    """A one-layer ``nn.LSTM`` or ``nn.GRU`` over flat ``[n, state_size]`` states."""

    def __init__(self, kind: str, in_dim: int, size: int):
        super().__init__()
        if kind is None:
            raise ValueError(f"a RecurrentCore needs a kind, one of {CORES}")
        check_core(kind)
        self.kind, self.size = kind, size
        self.rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(in_dim, size)
        for name, param in self.rnn.named_parameters():
            if name.startswith("weight"):
                nn.init.orthogonal_(param, 1.0)
            else:
                nn.init.zeros_(param)

    @property
    def state_size(self) -> int:
        return 2 * self.size if self.kind == "lstm" else self.size

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x [T, n, in]`` from ``state [n, S]`` without resets: ``([T, n, size], [n, S])``."""
        out, hidden = self._run(x, self._unflat(state))
        return out, self._flat(hidden)

    def _unflat(self, state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``[n, S]`` -> the kernel's ``(h, c)`` or ``(h,)``, each ``[1, n, size]`` (views)."""
        return torch.split(state.unsqueeze(0), self.size, dim=-1)

    @staticmethod
    def _flat(hidden: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return torch.cat(hidden, dim=-1).squeeze(0)

    def _run(
        self, x: torch.Tensor, hidden: tuple[torch.Tensor, ...]
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """The kernel ``nn.LSTM``/``nn.GRU`` call, on the module's own weights (the same op,
        the same bits), without their per-call Python checks: the learner calls this once
        per stretch between episode starts, up to ~60 times an R2D1 update on CartPole."""
        rnn = self.rnn
        # the layer-0 parameters nn.LSTM/nn.GRU register by name, unseen by torch's stubs
        weights = cast(
            "list[torch.Tensor]",
            [rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0],
        )
        # has_biases, num_layers, dropout, train, bidirectional, batch_first
        args = (weights, True, 1, 0.0, rnn.training, False, False)
        if self.kind == "lstm":
            out, h, c = torch.lstm(x, hidden, *args)
            return out, (h, c)
        out, h = torch.gru(x, hidden[0], *args)
        return out, (h,)

    def step(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """One step, ``x [n, in]`` from ``state [n, S]``: the next state ``[n, S]`` (its
        first ``size`` columns are the output). The fused cell kernel on the module's own
        weights: a sampler's per-step call costs a sixth of ``nn.LSTM``'s (measured)."""
        rnn = self.rnn
        weights = cast(  # as in ``_run``
            "tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]",
            (rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0),
        )
        if self.kind == "lstm":
            h, c = torch.split(state, self.size, dim=-1)
            return torch.cat(torch.lstm_cell(x, (h, c), *weights), dim=-1)
        return torch.gru_cell(x, state, *weights)

    def sequence(
        self, x: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor
    ) -> torch.Tensor:
        """``x [T, n, in]`` from ``state [n, S]``, zeroing a column's state before every step
        where ``episode_start [T, n]`` is set. The sequence is cut only at the steps where
        some column starts an episode; each stretch in between runs as one fused call."""
        return self.sequence_and_state(x, state, episode_start)[0]

    def sequence_and_state(
        self, x: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``sequence``'s outputs and the state after its last step (R2D1's burn-in)."""
        starts = episode_start.any(dim=1)
        starts[0] = True  # the first stretch begins at step 0 whatever the mask says
        bounds = torch.nonzero(starts).flatten().tolist() + [len(x)]
        keep = (~episode_start).unsqueeze(-1).to(state.dtype)  # [T, n, 1]
        # The state stays in the kernel's (h, c) between stretches: a flat [n, S] state
        # split and joined around every call cost a fifth of this pass on CartPole,
        # whose episode starts cut a sequence into stretches of one or two steps.
        hidden = self._unflat(state)
        outs = []
        for begin, end in zip(bounds[:-1], bounds[1:]):
            out, hidden = self._run(x[begin:end], tuple(part * keep[begin] for part in hidden))
            outs.append(out)
        return (torch.cat(outs) if len(outs) > 1 else outs[0]), self._flat(hidden)


class RecurrentTorso(nn.Module):
    """Features (MLP, or the CNN for the image size) then a recurrent core."""

    def __init__(
        self,
        obs_shape: Sequence[int],
        core: str,
        rnn_size: int,
        hidden: Sequence[int],
        activation: str,
        image: bool,
    ):
        super().__init__()
        self.obs_ndim, self.image = len(obs_shape), image
        if image:
            self.features: NatureCNN | SmallCNN | MLP = image_torso(tuple(obs_shape))
        else:
            self.features = MLP(int(torch.tensor(obs_shape).prod()), hidden, None, activation)
        self.core = RecurrentCore(core, self.features.out_dim, rnn_size)

    def embed(self, obs: torch.Tensor) -> torch.Tensor:
        features: torch.Tensor = self.features(
            obs if self.image else flatten_obs(obs, self.obs_ndim)
        )
        return features


class RecurrentActorCritic(nn.Module):
    """``forward(obs [n, ...], state [n, S]) -> (policy_params, value, next_state)`` and
    ``forward_sequence(obs [T, n, ...], state [n, S], episode_start [T, n]) ->
    (policy_params [T, n, P], value [T, n])``.

    ``separate_critic`` gives the value head a torso (features and core) of its own, as
    sb3-contrib's ``enable_critic_lstm``: the value loss then cannot pull the policy's
    memory around. Its state is the policy core's then the critic core's, side by side."""

    def __init__(
        self,
        obs_shape: Sequence[int],
        n_policy_params: int,
        core: str = "lstm",
        rnn_size: int = MODEL_DEFAULTS.rnn_size,
        hidden: Sequence[int] = (64,),
        activation: str = "tanh",
        gaussian_dim: int = 0,
        log_std_init: float = 0.0,
        image: bool = False,
        separate_critic: bool = False,
    ):
        super().__init__()
        self.actor = RecurrentTorso(obs_shape, core, rnn_size, hidden, activation, image)
        self.critic = (
            RecurrentTorso(obs_shape, core, rnn_size, hidden, activation, image)
            if separate_critic
            else None
        )
        self.pi = orthogonal_init(nn.Linear(rnn_size, n_policy_params), 0.01)
        self.v = orthogonal_init(nn.Linear(rnn_size, 1), 1.0)
        self.log_std = (
            nn.Parameter(torch.full((gaussian_dim,), float(log_std_init))) if gaussian_dim else None
        )

    @property
    def torsos(self) -> list[RecurrentTorso]:
        return [self.actor] if self.critic is None else [self.actor, self.critic]

    @property
    def state_size(self) -> int:
        return sum(torso.core.state_size for torso in self.torsos)

    def _heads(self, outs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        params = self.pi(outs[0])
        if self.log_std is not None:
            params = torch.cat([params, self.log_std.expand_as(params)], dim=-1)
        return params, self.v(outs[-1]).squeeze(-1)

    def _split(self, state: torch.Tensor) -> list[torch.Tensor]:
        return list(torch.split(state, [t.core.state_size for t in self.torsos], dim=-1))

    def forward(
        self, obs: torch.Tensor, state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        outs, next_states = [], []
        for torso, part in zip(self.torsos, self._split(state)):
            next_state = torso.core.step(torso.embed(obs), part)
            outs.append(next_state[:, : torso.core.size])
            next_states.append(next_state)
        params, value = self._heads(outs)
        return params, value, torch.cat(next_states, dim=-1)

    def forward_sequence(
        self, obs: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self._heads(
            [
                torso.core.sequence(torso.embed(obs), part, episode_start)
                for torso, part in zip(self.torsos, self._split(state))
            ]
        )
