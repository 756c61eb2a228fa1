"""R2D2's recurrent Q-network (Kapturowski et al., 2019): features (MLP, or the CNN for the
image size) -> LSTM -> plain or dueling Q head, with the recurrent actor-critics' flat
``[n, state_size]`` state, so every sampler carries it unchanged."""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from rlfw.models.q_network import DuelingHead
from rlfw.models.recurrent import RecurrentTorso
from rlfw.models.settings import MODEL_DEFAULTS


class RecurrentQNetwork(nn.Module):
    """``forward(obs [n, ...], state [n, S]) -> (q [n, A], next_state)`` (a sampler's step)
    and ``forward_sequence(obs [L, n, ...], state [n, S], episode_start [L, n]) ->
    q [L, n, A]`` (the learner's replayed sequences, restarting where episodes start)."""

    def __init__(
        self,
        obs_shape: Sequence[int],
        n_actions: int,
        rnn_size: int = MODEL_DEFAULTS.rnn_size,
        hidden: Sequence[int] = (64,),
        dueling: bool = True,
        image: bool = False,
        core: str = "lstm",
        encoder: nn.Module | None = None,
    ):
        super().__init__()
        # a nested observation's per-leaf encoder: its features are the torso's input
        self.encoder = encoder
        if encoder is not None:
            obs_shape, image = (int(getattr(encoder, "out_dim")),), False
        self.torso = RecurrentTorso(obs_shape, core, rnn_size, hidden, "relu", image)
        self.head = DuelingHead(rnn_size, n_actions) if dueling else nn.Linear(rnn_size, n_actions)

    @property
    def state_size(self) -> int:
        return self.torso.core.state_size

    def _embed(self, obs: Any) -> torch.Tensor:
        return self.torso.embed(obs if self.encoder is None else self.encoder(obs))

    def forward(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        next_state = self.torso.core.step(self._embed(obs), state)
        return self.head(next_state[:, : self.torso.core.size]), next_state

    def forward_sequence(
        self, obs: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor
    ) -> torch.Tensor:
        features = self._embed(obs)
        q: torch.Tensor = self.head(self.torso.core.sequence(features, state, episode_start))
        return q

    def sequence_and_state(
        self, obs: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``forward_sequence`` and the state after its last step."""
        out, last = self.torso.core.sequence_and_state(self._embed(obs), state, episode_start)
        return self.head(out), last
