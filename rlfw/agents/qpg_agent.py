"""The agent of SAC, TD3 and DDPG: a continuous actor (plus the critics it is judged by)
acting on Box action spaces through ``[-1, 1]`` buffer actions."""

from __future__ import annotations

import math
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
import torch

from rlfw.agents.actor_critic import normalized_leaves
from rlfw.agents.base import AgentState, AgentStep, ModelAgent, Observation
from rlfw.buffers import PolicyInfo
from rlfw.envs.spaces import EnvSpaces
from rlfw.models.encoders import ObservationEncoder
from rlfw.models.normalize import ObservationNormalizer, TreeNormalizer
from rlfw.models.qpg import (
    ActorAndCritics,
    CriticEnsemble,
    DeterministicActor,
    SdeSquashedGaussianActor,
    SquashedGaussianActor,
)

ACTORS = ("squashed_gaussian", "deterministic")


def check_box_actions(space: gym.Space[Any], algo: str) -> gym.spaces.Box:
    """The action space as a bounded Box; else one line naming what is allowed."""
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(
            f"action space {space} is not supported by {algo}: it needs a Box (continuous "
            "actions); for Discrete, MultiDiscrete or MultiBinary use ppo or a2c (dqn, "
            "c51, rainbow: Discrete)"
        )
    if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        raise ValueError(
            f"action space {space} is unbounded (low {space.low.tolist()}, high "
            f"{space.high.tolist()}): {algo} squashes actions into the space's bounds, so "
            "they must be finite; wrap the env in gymnasium.wrappers.RescaleAction or "
            "ClipAction with the bounds the env really accepts"
        )
    return space


class QpgAgent(ModelAgent):
    """Acts with the actor from the sampler's standard-normal noise (one per action
    dimension): the squashed Gaussian's sample (SAC) or the deterministic action plus
    scaled noise, clipped (TD3, DDPG); the mean action in ``eval_mode``. While
    ``model.warmup`` is set (before ``learning_starts``), actions are uniform on ``[-1,
    1]``, made from the same noise (``erf(z / sqrt 2)``). Buffer actions are in ``[-1,
    1]``; ``env_action`` maps them onto the Box's bounds.

    With gSDE (SAC's ``SdeSquashedGaussianActor``) the noise is a ``[latent_dim,
    action_dim]`` matrix per env that the sampler holds for ``noise_hold`` steps; warm-up
    actions come from its first row, so they too hold for that many steps.

    ``keeps_final_observation``: samplers store a truncated step's true final observation
    in the batch, so the learner bootstraps from it with its current target networks."""

    noise_kind = "normal"
    keeps_final_observation = True
    model: ActorAndCritics

    def __init__(self, model: ActorAndCritics, action_space: gym.spaces.Box, device: str = "cpu"):
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.action_space = action_space
        self.action_dim = int(np.prod(action_space.shape))
        self.noise_shape = tuple(getattr(model.actor, "noise_shape", (self.action_dim,)))
        self.sde = isinstance(model.actor, SdeSquashedGaussianActor)
        self.greedy = False
        low = action_space.low.astype(np.float64).reshape(-1)
        high = action_space.high.astype(np.float64).reshape(-1)
        self._centre, self._half = (high + low) / 2, (high - low) / 2

    @classmethod
    def build(
        cls,
        spaces: EnvSpaces,
        actor: str,
        algo: str,
        model: str = "auto",
        hidden: Sequence[int] = (256, 256),
        critic_hidden: Sequence[int] | None = None,
        n_critics: int = 2,
        activation: str = "relu",
        action_noise: float = 0.1,
        device: str = "cpu",
        normalize_obs: bool = False,
        obs_clip: float = 10.0,
        sde_sample_freq: int = 0,
        log_std_init: float = -3.0,
        sde_expln: bool = False,
    ) -> "QpgAgent":
        """``actor``: 'squashed_gaussian' (SAC) or 'deterministic' (TD3, DDPG, exploring
        with ``action_noise``); ``n_critics`` Q-functions of ``critic_hidden`` (default:
        ``hidden``); ``normalize_obs``: standardize the float Box leaves by running
        statistics the learner updates once per batch (SB3's VecNormalize for off-policy
        algorithms, which also normalizes at sample time from raw stored observations);
        ``sde_sample_freq`` > 0 (SAC): gSDE exploration from ``log_std_init``, its noise
        matrix resampled every that many env steps (SB3's ``use_sde``, ``use_expln``:
        ``sde_expln``)."""
        space = check_box_actions(spaces.action, algo)
        if actor not in ACTORS:
            raise ValueError(f"actor {actor!r} unknown; choose from {ACTORS}")
        action_dim = int(np.prod(space.shape))
        obs = spaces.observation
        if isinstance(sde_sample_freq, bool) or not isinstance(sde_sample_freq, int):
            raise ValueError(f"sde_sample_freq must be an int >= 0, got {sde_sample_freq!r}")
        if sde_sample_freq < 0 or (sde_sample_freq and actor != "squashed_gaussian"):
            raise ValueError(
                f"sde_sample_freq={sde_sample_freq}: gSDE is for sac's squashed Gaussian "
                f"(an int >= 1 there; 0: plain Gaussian noise); {algo} explores with "
                "action_noise"
            )
        pi: torch.nn.Module
        if sde_sample_freq:
            pi = SdeSquashedGaussianActor(
                ObservationEncoder(obs, model),
                action_dim,
                hidden,
                activation,
                log_std_init,
                sde_expln,
            )
        elif actor == "squashed_gaussian":
            pi = SquashedGaussianActor(
                ObservationEncoder(obs, model), action_dim, hidden, activation
            )
        else:
            pi = DeterministicActor(
                ObservationEncoder(obs, model), action_dim, hidden, activation, action_noise
            )
        critics = CriticEnsemble(
            ObservationEncoder(obs, model),
            action_dim,
            hidden if critic_hidden is None else critic_hidden,
            n_critics,
            activation,
        )
        normalizer: torch.nn.Module | None = None
        if normalize_obs:
            normalizer = (
                ObservationNormalizer(obs.shape, obs_clip)
                if isinstance(obs, gym.spaces.Box)
                else TreeNormalizer(normalized_leaves(obs), obs_clip)
            )
        agent = cls(ActorAndCritics(pi, critics, normalizer), space, device)
        agent.noise_hold = max(sde_sample_freq, 1)
        return agent

    @property
    def actor(self) -> Any:  # SquashedGaussianActor or DeterministicActor
        return self.model.actor

    @property
    def critics(self) -> CriticEnsemble:
        return self.model.critics

    def _set_training(self, training: bool) -> None:
        # Linear layers, activations and rlfw's encoders behave alike in both modes, and
        # at one env step per batch the mode switch (a walk over every submodule, twice
        # a step) costs more than an update's Python; so the model stays in one mode.
        pass

    def set_warmup(self, on: bool) -> None:
        """Uniform actions (the warm-up before learning starts) or the actor's."""
        self.model.warmup.fill_(on)

    def update_normalization(self, observation: Any) -> None:
        """Merge a batch's raw observation rows (``[N, ...]`` per leaf) into the
        statistics (a no-op without ``normalize_obs``)."""
        self.model.update_normalization(observation)

    @torch.no_grad()
    def step(
        self,
        obs: Observation,
        noise: np.ndarray | torch.Tensor,
        slots: Sequence[int] | None = None,
        state: AgentState = None,
    ) -> AgentStep:
        obs = self.model.normalize(self._obs(obs))
        if self.greedy:
            action = self.actor.mean_action(obs)
        else:
            normal = torch.as_tensor(noise, device=self.device, dtype=torch.float32)
            if bool(self.model.warmup):
                uniform_from = normal[..., 0, :] if self.sde else normal
                action = torch.erf(uniform_from * (1 / math.sqrt(2)))
            else:
                action = self.actor.explore(obs, normal)
        return AgentStep(action.float().cpu(), PolicyInfo())

    @torch.no_grad()
    def value(self, obs: Observation, state: AgentState = None) -> torch.Tensor:
        """min_i Q_i(obs, mean action): what bootstraps a batch's open end for statistics;
        truncated steps are bootstrapped by the learner from their stored final
        observation."""
        obs = self.model.normalize(self._obs(obs))
        q: torch.Tensor = self.critics(obs, self.actor.mean_action(obs))
        return q.min(0).values

    def env_action(self, action: torch.Tensor) -> np.ndarray:
        """``[-1, 1]`` buffer actions -> the Box's bounds and shape, in its dtype."""
        act = action.cpu().numpy().astype(np.float64)
        act = self._centre + self._half * np.clip(act, -1.0, 1.0)
        space = self.action_space
        return act.reshape(act.shape[:-1] + space.shape).astype(space.dtype)
