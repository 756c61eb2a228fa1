"""What every model-backed agent shares: modes, parameters and weights of ``self.model``."""
from __future__ import annotations

import torch
from torch import nn


class ModelAgent:
    """Modes: ``sample_mode()`` (stochastic, for collecting), ``eval_mode()`` (greedy),
    ``train_mode()`` (module in training mode for the optimizer). The weights are
    ``self.model``'s state dict, which is also what parallel samplers ship to workers."""

    model: nn.Module
    greedy: bool = False

    def sample_mode(self) -> None:
        self.greedy = False
        self._set_training(False)

    def eval_mode(self) -> None:
        self.greedy = True
        self._set_training(False)

    def train_mode(self) -> None:
        self.greedy = False
        self._set_training(True)

    def _set_training(self, training: bool) -> None:
        if self.model.training != training:  # walking every submodule each batch adds up
            self.model.train(training)

    def parameters(self):
        return self.model.parameters()

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.model.state_dict()

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(state)
