"""A fake agent whose every output is a known function of its inputs, for sampler tests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence, cast

import gymnasium as gym
import numpy as np
import torch

from rlfw.agents.base import AgentState, AgentStep, ModelAgent, Observation
from rlfw.buffers import AgentInfo

if TYPE_CHECKING:
    from rlfw.agents import ActorCriticAgent
    from rlfw.envs.spaces import EnvSpaces


class CountingAgent(ModelAgent):
    """For ``CountingEnv`` observations ``[tag, episode, t]``:

    - action = floor(u * n_actions) where u is the slot's uniform noise (so the samples show
      which noise stream each slot got), or ``t % n_actions`` when greedy;
    - ``info.logp`` = u (the noise itself), ``info.value`` = V(obs) = 10 * episode + t.

    ``noise_hold`` asks for each draw to serve that many steps (as gSDE's noise does);
    ``keeps_final_observation`` asks samplers for truncated steps' final observations (as
    SAC's agent does) instead of their values.
    """

    noise_shape: tuple[int, ...] = ()
    noise_kind = "uniform"

    def __init__(
        self, n_actions: int = 3, noise_hold: int = 1, keeps_final_observation: bool = False
    ):
        self.n_actions = n_actions
        self.keeps_final_observation = keeps_final_observation
        self.noise_hold = noise_hold
        self.greedy = False
        self.model = torch.nn.Linear(1, 1)  # something to checkpoint

    @staticmethod
    def counts(obs: Observation) -> torch.Tensor:
        """The ``[tag, episode, t]`` rows: the observation itself, or the ``count`` leaf of
        a ``NestedCountingEnv``'s."""
        return torch.as_tensor(obs["count"] if isinstance(obs, dict) else obs, dtype=torch.float32)

    @classmethod
    def value_of(cls, obs: Observation) -> torch.Tensor:
        obs = cls.counts(obs)
        return 10 * obs[..., 1] + obs[..., 2]

    def step(
        self,
        obs: Observation,
        noise: np.ndarray | torch.Tensor,
        slots: Sequence[int] | None = None,
        state: AgentState = None,
    ) -> AgentStep:
        obs = self.counts(obs)
        u = torch.as_tensor(noise, dtype=torch.float32)
        if self.greedy:
            action = obs[..., 2].long() % self.n_actions
        else:
            action = (u * self.n_actions).long()
        return AgentStep(action, AgentInfo(u.clone(), self.value_of(obs)))

    def value(self, obs: Observation, state: AgentState = None) -> torch.Tensor:
        return self.value_of(obs)

    def env_action(self, action: torch.Tensor) -> np.ndarray:
        return action.numpy()


class ConstantActionAgent(ModelAgent):
    """Always takes ``action`` (e.g. Atari NOOP: an agent that never presses FIRE)."""

    noise_shape: tuple[int, ...] = ()
    noise_kind = "uniform"

    def __init__(self, action: int = 0):
        self.action = action
        self.greedy = False
        self.model = torch.nn.Linear(1, 1)

    def step(
        self,
        obs: Observation,
        noise: np.ndarray | torch.Tensor,
        slots: Sequence[int] | None = None,
        state: AgentState = None,
    ) -> AgentStep:
        n = len(obs)
        return AgentStep(
            torch.full((n,), self.action, dtype=torch.long),
            AgentInfo(torch.zeros(n), torch.zeros(n)),
        )

    def value(self, obs: Observation, state: AgentState = None) -> torch.Tensor:
        return torch.zeros(len(obs))

    def env_action(self, action: torch.Tensor) -> np.ndarray:
        return action.numpy()


class ElementwiseActorCritic(torch.nn.Module):
    """A trainable actor-critic with no matrix products: Gaussian mean = ``w * obs[:d]``,
    value = ``v · obs``. Row results then never depend on how many rows one call gets
    (matrix-multiply kernels do), so a real ``ActorCriticAgent`` on it samples the same
    bits on every sampler, and a whole training run compares bitwise across samplers."""

    def __init__(self, obs_dim: int, action_dim: int):
        super().__init__()
        if action_dim > obs_dim:
            raise ValueError(f"needs action_dim <= obs_dim, got {action_dim} > {obs_dim}")
        self.action_dim = action_dim
        self.w = torch.nn.Parameter(torch.full((action_dim,), 0.5))
        self.v = torch.nn.Parameter(torch.full((obs_dim,), 0.1))
        self.log_std = torch.nn.Parameter(torch.zeros(action_dim))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        obs = obs.float()
        mean = self.w * obs[..., : self.action_dim]
        params = torch.cat([mean, self.log_std.expand_as(mean)], dim=-1)
        return params, (obs * self.v).sum(-1)


def elementwise_gaussian_agent(
    spaces: EnvSpaces,
    normalize_obs: bool = True,
    obs_clip: float = 10.0,
    obs_norm_update: str = "batch",
) -> ActorCriticAgent:
    """An ``ActorCriticAgent`` (DiagGaussian, optionally normalized observations, their
    statistics updated per 'batch' or per 'step') on an ``ElementwiseActorCritic``, for
    Box-action envs with flat observations."""
    from rlfw.agents import ActorCriticAgent
    from rlfw.agents.distributions import DiagGaussian
    from rlfw.models.normalize import NormalizedModel

    observation = cast(gym.spaces.Box, spaces.observation)  # flat Box observations
    action = cast(gym.spaces.Box, spaces.action)
    obs_shape, action_dim = observation.shape, action.shape[0]
    model: torch.nn.Module = ElementwiseActorCritic(obs_shape[0], action_dim)
    if normalize_obs:
        model = NormalizedModel(model, obs_shape, obs_clip, obs_norm_update)
    return ActorCriticAgent(model, DiagGaussian(action_dim), spaces.action)


class CountingRecurrentAgent(CountingAgent):
    """A recurrent ``CountingAgent``: each slot's state (size 1) counts the steps since its
    state was last reset, +1 per step. It shows in the samples: ``info.value`` is the count
    before the step (on ``CountingEnv`` it equals the observation's ``t`` exactly when the
    sampler resets states at every episode start), ``value(obs, state)`` is the count, a
    sampled action is ``(floor(u * n_actions) + count) % n_actions`` and a greedy one
    ``count % n_actions`` (what ``CountMatchingEnv`` rewards)."""

    def initial_state(self, n: int) -> torch.Tensor:
        return torch.zeros(n, 1)

    def step(
        self,
        obs: Observation,
        noise: np.ndarray | torch.Tensor,
        slots: Sequence[int] | None = None,
        state: AgentState = None,
    ) -> AgentStep:
        state = cast(torch.Tensor, state)  # samplers pass every slot's (``initial_state``)
        count = state[:, 0]
        u = torch.as_tensor(noise, dtype=torch.float32)
        if self.greedy:
            action = count.long() % self.n_actions
        else:
            action = ((u * self.n_actions).long() + count.long()) % self.n_actions
        return AgentStep(action, AgentInfo(u.clone(), count.clone()), state + 1)

    def value(self, obs: Observation, state: AgentState = None) -> torch.Tensor:
        return cast(torch.Tensor, state)[:, 0].clone()


class ElementwiseRecurrentActorCritic(torch.nn.Module):
    """A trainable recurrent actor-critic with no matrix products (see
    ``ElementwiseActorCritic``): state ``h' = tanh(a * h + b * obs[:d])``, Gaussian mean
    ``w * h'``, value ``v · obs + c · h'``. Its sequence pass is the step applied in a loop,
    so re-running a column in the learner gives the sampled bits, and a whole recurrent run
    compares bitwise across samplers (a real LSTM's GEMMs round by row count)."""

    def __init__(self, obs_dim: int, action_dim: int):
        super().__init__()
        if action_dim > obs_dim:
            raise ValueError(f"needs action_dim <= obs_dim, got {action_dim} > {obs_dim}")
        self.action_dim = self.state_size = action_dim
        self.a = torch.nn.Parameter(torch.full((action_dim,), 0.5))
        self.b = torch.nn.Parameter(torch.full((action_dim,), 0.3))
        self.w = torch.nn.Parameter(torch.full((action_dim,), 0.5))
        self.c = torch.nn.Parameter(torch.full((action_dim,), 0.2))
        self.v = torch.nn.Parameter(torch.full((obs_dim,), 0.1))
        self.log_std = torch.nn.Parameter(torch.zeros(action_dim))

    def forward(
        self, obs: torch.Tensor, state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        obs = obs.float()
        h = torch.tanh(self.a * state + self.b * obs[..., : self.action_dim])
        mean = self.w * h
        params = torch.cat([mean, self.log_std.expand_as(mean)], dim=-1)
        return params, (obs * self.v).sum(-1) + (self.c * h).sum(-1), h

    def forward_sequence(
        self, obs: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        params, values = [], []
        for t in range(len(obs)):
            state = state * (~episode_start[t]).unsqueeze(-1).to(state.dtype)
            p, v, state = self(obs[t], state)
            params.append(p)
            values.append(v)
        return torch.stack(params), torch.stack(values)


def elementwise_recurrent_agent(spaces: EnvSpaces) -> ActorCriticAgent:
    """An ``ActorCriticAgent`` (DiagGaussian) on an ``ElementwiseRecurrentActorCritic``."""
    from rlfw.agents import ActorCriticAgent
    from rlfw.agents.distributions import DiagGaussian

    observation = cast(gym.spaces.Box, spaces.observation)  # flat Box observations
    action = cast(gym.spaces.Box, spaces.action)
    obs_shape, action_dim = observation.shape, action.shape[0]
    return ActorCriticAgent(
        ElementwiseRecurrentActorCritic(obs_shape[0], action_dim),
        DiagGaussian(action_dim),
        spaces.action,
    )
