"""Categorical DQN (C51, Bellemare et al., 2017): the return of each action as a categorical
distribution on a fixed support, learned by projecting the n-step Bellman target onto the
support and minimising the cross-entropy. Everything else is DQN's: replay (uniform or
prioritized), n-step returns, double-Q action selection, dueling heads, ε schedules,
target copies, checkpoints."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlfw.agents.distributions import mask_values
from rlfw.algos.dqn.dqn import DQN, DQNConfig
from rlfw.buffers.tree import Tree
from rlfw.utils.checks import check_config


@dataclass
class C51Config(DQNConfig):
    """DQN's settings plus the support: ``atoms`` values evenly spaced on
    ``[v_min, v_max]`` (the paper's Atari setting: 51 on [-10, 10])."""

    atoms: int = 51
    """Values of the return distribution's support."""
    v_min: float = -10.0
    """The support's lowest value."""
    v_max: float = 10.0
    """The support's highest value."""

    def validate(self) -> None:
        super().validate()
        check_config(
            "C51Config",
            atoms=(
                self.atoms,
                isinstance(self.atoms, int) and self.atoms >= 2,
                "must be an int >= 2",
            ),
            v_max=(self.v_max, self.v_max > self.v_min, f"must be > v_min ({self.v_min})"),
            advantage_learning=(
                self.advantage_learning,
                self.advantage_learning == 0,
                "must be 0: advantage learning acts on action values, C51 learns distributions",
            ),
        )


def project_distribution(
    values: torch.Tensor, probs: torch.Tensor, support: torch.Tensor
) -> torch.Tensor:
    """Probabilities ``probs`` ``[N, K]`` sitting at return values ``values`` ``[N, K]``,
    moved onto ``support`` ``[K]`` (evenly spaced): each value is clipped to the support's
    range and its mass split between the two neighbouring atoms in proportion to its
    distance from each (all on it when it sits on an atom). Rows sum as ``probs`` do."""
    v_min, v_max, atoms = support[0], support[-1], len(support)
    position = (values.clamp(v_min, v_max) - v_min) / ((v_max - v_min) / (atoms - 1))
    lower = position.floor().clamp(0, atoms - 1)
    upper = position.ceil().clamp(0, atoms - 1)
    on_atom = (upper == lower).to(probs.dtype)
    projected = torch.zeros_like(probs)
    projected.scatter_add_(-1, lower.long(), probs * (upper - position + on_atom))
    projected.scatter_add_(-1, upper.long(), probs * (position - lower))
    return projected


class C51(DQN):
    """DQN with a categorical return distribution per action (``atoms > 1`` heads). The
    priority of a transition is its cross-entropy loss, as in Rainbow."""

    config: C51Config

    def __init__(self, config: C51Config | None = None):
        super().__init__(config or C51Config())

    def _losses(
        self,
        observation: Tree,
        next_observation: Tree,
        action: torch.Tensor,
        n_step_return: torch.Tensor,
        bootstrap_discount: torch.Tensor,
        next_value_known: torch.Tensor,
        next_value: torch.Tensor,
        weight: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(cross-entropy loss, mean return of the taken actions, per-sample loss)."""
        c = self.config
        q_net = self.agent.q
        support = q_net.support
        rows = torch.arange(len(action))
        taken = action.long()
        log_p = q_net.log_distribution(observation)[rows, taken]  # [N, K]
        with torch.no_grad():
            next_p = self.target.log_distribution(next_observation).exp()  # [N, A, K]
            next_values = q_net(next_observation) if c.double_dqn else (next_p * support).sum(-1)
            if self.agent.masked:  # the best of the next state's valid actions
                next_values = mask_values(next_values, next_observation)
            next_best = next_values.argmax(-1)
            p_next = next_p[rows, next_best]
            # n-step target atoms; after a truncation the sampler's V(final obs) is all there
            # is: a point mass there (every atom moved to it)
            atoms = n_step_return.unsqueeze(-1) + bootstrap_discount.unsqueeze(-1) * support
            known = (n_step_return + bootstrap_discount * next_value).unsqueeze(-1)
            atoms = torch.where(next_value_known.unsqueeze(-1), known.expand_as(atoms), atoms)
            target = project_distribution(atoms, p_next, support)
        per_sample = -(target * log_p).sum(-1)
        loss = (weight * per_sample).mean() if c.prioritized else per_sample.mean()
        q_taken = (log_p.detach().exp() * support).sum(-1)
        return loss, q_taken, per_sample.detach()
