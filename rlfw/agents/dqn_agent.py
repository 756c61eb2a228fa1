"""DQN agent: a Q-network with ε-greedy exploration, one ε per env slot."""

from __future__ import annotations

from typing import Any, Generic, Mapping, Sequence, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from typing_extensions import TypeVar

from rlfw.agents.base import AgentState, AgentStep, ModelAgent, Observation, invariant_rows
from rlfw.agents.distributions import masked_logits
from rlfw.buffers import QInfo
from rlfw.envs.masks import MASK_KEY
from rlfw.envs.spaces import EnvSpaces
from rlfw.models.cnn import model_kind
from rlfw.models.encoders import ObservationEncoder
from rlfw.models.q_network import QNetwork
from rlfw.models.recurrent_q import RecurrentQNetwork
from rlfw.models.settings import MODEL_DEFAULTS

# The Q-network's class: ``QNetwork`` (DQN, C51) unless said otherwise (R2D1's recurrent one).
QT = TypeVar("QT", bound=nn.Module, default=QNetwork)


class EpsilonGreedyQ(nn.Module, Generic[QT]):
    """The Q-network plus the per-slot ε as a buffer: ε then travels with the weights to
    parallel-sampler workers, which receive ``state_dict()`` copies."""

    epsilon: torch.Tensor

    def __init__(self, q: QT, batch_B: int):
        super().__init__()
        self.q = q
        self.register_buffer("epsilon", torch.ones(batch_B))

    @property
    def state_size(self) -> int:
        """The recurrent Q-network's state size (0: feed-forward)."""
        return int(getattr(self.q, "state_size", 0))

    def forward(self, obs: Observation) -> torch.Tensor:
        q: torch.Tensor = self.q(obs)
        return q


def apex_epsilons(batch_B: int, base: float = 0.4, alpha: float = 7.0) -> np.ndarray:
    """Ape-X's fixed per-actor exploration: ε_i = base^(1 + α i / (N - 1))."""
    if batch_B == 1:
        return np.array([base])
    return base ** (1 + alpha * np.arange(batch_B) / (batch_B - 1))


class DqnAgent(ModelAgent, Generic[QT]):
    """``step`` is ε-greedy from the sampler's noise ``[u_explore, u_action]`` per slot,
    with each slot's training ε; in ``eval_mode`` (``greedy``) ε is ``eval_epsilon`` (0:
    the argmax; the Atari literature evaluates with 0.05)."""

    noise_shape = (2,)
    noise_kind = "uniform"
    model: EpsilonGreedyQ[QT]

    def __init__(
        self,
        q: QT,
        n_actions: int,
        batch_B: int,
        device: str = "cpu",
        eval_epsilon: float = 0.0,
    ):
        if not 0 <= eval_epsilon <= 1:
            raise ValueError(f"eval_epsilon = {eval_epsilon!r} is invalid: must be in [0, 1]")
        self.model = EpsilonGreedyQ(q, batch_B).to(device)
        self.n_actions = n_actions
        self.eval_epsilon = eval_epsilon
        self.device = torch.device(device)
        self.greedy = False

    @classmethod
    def build(
        cls,
        spaces: EnvSpaces,
        batch_B: int,
        model: str = "auto",
        hidden: Sequence[int] = (256, 256),
        dueling: bool = False,
        device: str = "cpu",
        eval_epsilon: float = 0.0,
        atoms: int = 1,
        v_min: float = -10.0,
        v_max: float = 10.0,
        action_mask: bool = False,
        layer_norm: bool = False,
    ) -> "DqnAgent":
        """ε-greedy over a Q-network; ``atoms > 1``: a C51 head on ``[v_min, v_max]``
        (actions greedy on the distributions' means); ``layer_norm``: a LayerNorm before
        each hidden ReLU (PQN's network)."""
        action_space = check_discrete_actions(spaces.action, "dqn")
        obs = spaces.observation
        encoder = None if isinstance(obs, gym.spaces.Box) else ObservationEncoder(obs, model)
        q = QNetwork(
            getattr(obs, "shape", ()),
            getattr(obs, "dtype", None),
            int(action_space.n),
            hidden,
            dueling,
            model,
            atoms,
            v_min,
            v_max,
            encoder,
            layer_norm,
        )
        # a QNetwork's agent, whatever cls's Q-network (R2D1's agent has build_recurrent)
        make = cast("type[DqnAgent[QNetwork]]", cls)
        agent = make(q, int(action_space.n), batch_B, device, eval_epsilon)
        agent.masked = action_mask
        return agent

    @property
    def q(self) -> QT:
        return self.model.q

    def set_epsilon(self, epsilon: float | np.ndarray) -> None:
        self.model.epsilon.copy_(
            torch.as_tensor(epsilon, dtype=torch.float32).expand_as(self.model.epsilon)
        )

    masked = False  # acts over the observation's action_mask (``build``)

    def _q(
        self, obs: Observation, slots: Sequence[int] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(Q-values, the valid-action mask or None); invalid actions' values are the
        dtype's lowest, so a max or argmax never picks one."""
        obs = self._obs(obs)
        q: torch.Tensor = invariant_rows(self.model, obs, pad=not self.greedy)
        if not self.masked:
            return q, None
        mask = cast("Mapping[str, torch.Tensor]", obs)[MASK_KEY]  # a masked agent's are dicts
        q = masked_logits(q, mask, None, slots)
        return q, mask.to(torch.bool)

    @torch.no_grad()
    def step(
        self,
        obs: Observation,
        noise: np.ndarray | torch.Tensor,
        slots: Sequence[int] | None = None,
        state: AgentState = None,
    ) -> AgentStep:
        q, valid = self._q(obs, slots)
        return AgentStep(self._epsilon_greedy(q, noise, slots, valid), QInfo(q.max(-1).values))

    def _epsilon_greedy(
        self,
        q: torch.Tensor,
        noise: np.ndarray | torch.Tensor,
        slots: Sequence[int] | None,
        valid: torch.Tensor | None = None,
    ) -> torch.Tensor:
        best = q.argmax(-1)
        if self.greedy and self.eval_epsilon == 0:
            return best
        u = torch.as_tensor(noise, device=self.device)
        if self.greedy:
            eps = torch.full((len(u),), self.eval_epsilon, device=self.device)
        else:
            eps = self.model.epsilon if slots is None else self.model.epsilon[list(slots)]
        if valid is None:
            random = (u[:, 1] * self.n_actions).long().clamp_(max=self.n_actions - 1)
        else:  # uniform over the valid actions: the k-th valid one, k = floor(u * count)
            count = valid.sum(-1)
            k = (u[:, 1] * count).long().clamp_(max=count - 1)
            random = (valid.cumsum(-1) <= k.unsqueeze(-1)).sum(-1)
        return torch.where(u[:, 0] < eps[: len(u)], random, best)

    @torch.no_grad()
    def value(self, obs: Observation, state: AgentState = None) -> torch.Tensor:
        return self._q(obs)[0].max(-1).values

    def env_action(self, action: torch.Tensor) -> np.ndarray:
        return action.cpu().numpy()


def check_discrete_actions(space: gym.Space[Any], algo: str) -> gym.spaces.Discrete:
    """The Q-learning family picks among the Discrete action space's values (the space, as
    a Discrete); anything else is one line naming the way out."""
    if isinstance(space, gym.spaces.Discrete):
        return space
    small = ""
    if isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        size = (
            int(np.prod(space.nvec))
            if isinstance(space, gym.spaces.MultiDiscrete)
            else (2 ** int(np.prod(space.shape)))
        )
        small = (
            f"; its {size} joint actions could be one Discrete({size}) through a wrapper "
            "that maps an index to the action"
        )
    raise ValueError(
        f"action space {space} is not supported by {algo}: the Q-learning family needs a "
        f"Discrete action space (ppo and a2c take MultiDiscrete, MultiBinary and Box){small}"
    )


class RecurrentDqnAgent(DqnAgent[RecurrentQNetwork]):
    """R2D1's agent: ε-greedy over a ``RecurrentQNetwork``, one recurrent state per env
    slot carried by the sampler (``initial_state``, ``step(..., state)``)."""

    @classmethod
    def build_recurrent(
        cls,
        spaces: EnvSpaces,
        batch_B: int,
        rnn_size: int = MODEL_DEFAULTS.rnn_size,
        hidden: Sequence[int] = (64,),
        dueling: bool = True,
        device: str = "cpu",
        eval_epsilon: float = 0.0,
        model: str = "auto",
    ) -> "RecurrentDqnAgent":
        action_space = check_discrete_actions(spaces.action, "r2d1")
        obs = spaces.observation
        if isinstance(obs, gym.spaces.Box):
            image = model_kind(model, obs.shape, obs.dtype) == "cnn"
            q = RecurrentQNetwork(obs.shape, int(action_space.n), rnn_size, hidden, dueling, image)
        else:
            q = RecurrentQNetwork(
                (),
                int(action_space.n),
                rnn_size,
                hidden,
                dueling,
                encoder=ObservationEncoder(obs, model),
            )
        return cls(q, int(action_space.n), batch_B, device, eval_epsilon)

    @torch.no_grad()
    def step(
        self,
        obs: Observation,
        noise: np.ndarray | torch.Tensor,
        slots: Sequence[int] | None = None,
        state: AgentState = None,
    ) -> AgentStep:
        q, next_state = invariant_rows(self.q, self._obs(obs), state, pad=not self.greedy)
        return AgentStep(self._epsilon_greedy(q, noise, slots), QInfo(q.max(-1).values), next_state)

    @torch.no_grad()
    def value(self, obs: Observation, state: AgentState = None) -> torch.Tensor:
        q, _ = invariant_rows(self.q, self._obs(obs), state)
        best: torch.Tensor = q.max(-1).values
        return best
