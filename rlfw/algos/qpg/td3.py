"""TD3 (Fujimoto et al., 2018): twin critics, target policy smoothing and a delayed actor;
DDPG (Lillicrap et al., 2016) is the same update without those three, as SB3 defines it
(one critic, no smoothing, the actor every update)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rlfw.algos.optim import gradient_step
from rlfw.algos.qpg.base import QFunctionPolicyGradient, QpgConfig, frozen_copy, polyak
from rlfw.buffers.replay import ReplayBatch
from rlfw.utils.checks import check_config


@dataclass
class TD3Config(QpgConfig):
    """TD3's settings (defaults: SB3's TD3)."""

    learning_rate: float = 1e-3
    """The step size of the actor's and the critics' Adam optimizers."""
    action_noise: float = 0.1
    """Exploration: std of the Gaussian added to the actor's action (in [-1, 1] units)."""
    policy_delay: int = 2
    """Critic updates per actor (and target) update."""
    target_policy_noise: float = 0.2
    """Target smoothing: std of the noise on the target actor's action."""
    target_noise_clip: float = 0.5
    """Target smoothing: the noise is clipped to ±this."""

    def validate(self) -> None:
        super().validate()
        check_config(
            type(self).__name__,
            action_noise=(self.action_noise, self.action_noise >= 0, "must be >= 0"),
            policy_delay=(
                self.policy_delay,
                isinstance(self.policy_delay, int) and self.policy_delay >= 1,
                "must be an int >= 1",
            ),
            target_policy_noise=(
                self.target_policy_noise,
                self.target_policy_noise >= 0,
                "must be >= 0",
            ),
            target_noise_clip=(self.target_noise_clip, self.target_noise_clip >= 0, "must be >= 0"),
        )


@dataclass
class DDPGConfig(TD3Config):
    """DDPG's settings (defaults: SB3's DDPG: TD3 with one critic, no target smoothing and
    the actor updated every step)."""

    n_critics: int = 1
    """Q-functions whose minimum is the target."""
    policy_delay: int = 1
    """Critic updates per actor (and target) update."""
    target_policy_noise: float = 0.0
    """Target smoothing: std of the noise on the target actor's action."""


class TD3(QFunctionPolicyGradient):
    """TD3 on the common replay (see ``QFunctionPolicyGradient``); with ``DDPGConfig``, DDPG."""

    config: TD3Config
    critic_loss_scale = 1.0  # the sum of the critics' MSE, as TD3's and SB3's code

    @staticmethod
    def default_config() -> TD3Config:
        return TD3Config()

    def _setup(self) -> None:
        self.actor_flat, self.actor_optimizer = self._optimizer(self.agent.actor)
        self.actor_target: Any = frozen_copy(self.agent.actor)

    def _update(self, batch: ReplayBatch) -> dict[str, torch.Tensor]:
        c, agent = self.config, self.agent
        with torch.no_grad():
            next_action = self.actor_target.mean_action(batch.next_observation)
            if c.target_policy_noise > 0:
                noise = self._normal(next_action.shape).mul_(c.target_policy_noise)
                noise.clamp_(-c.target_noise_clip, c.target_noise_clip)
                next_action = (next_action + noise).clamp_(-1.0, 1.0)
            next_q = self.critic_target(batch.next_observation, next_action).min(0).values
            target = self._bootstrap(batch, next_q)
        stats = self._critic_step(batch, target)
        if (self.updates + 1) % c.policy_delay == 0:
            agent.critics.requires_grad_(False)  # the actor's loss needs dQ/da only
            action = agent.actor.mean_action(batch.observation)
            actor_loss = -agent.critics(batch.observation, action, member=0).mean()
            gradient_step(self.actor_optimizer, self.actor_flat, actor_loss, None)
            agent.critics.requires_grad_(True)
            polyak(self.critic_target, agent.critics, c.tau)
            polyak(self.actor_target, agent.actor, c.tau)
            stats["actor_loss"] = actor_loss.detach()
        return stats

    def _state(self) -> dict[str, Any]:
        return {
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "actor_target": self.actor_target.state_dict(),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.actor_target.load_state_dict(state["actor_target"])


class DDPG(TD3):
    """DDPG as SB3 defines it: TD3 with one critic, no target smoothing and the actor
    updated every step (``DDPGConfig``'s defaults)."""

    @staticmethod
    def default_config() -> DDPGConfig:
        return DDPGConfig()
