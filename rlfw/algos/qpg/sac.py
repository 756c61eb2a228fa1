"""SAC (Haarnoja et al., 2018, with the learned temperature of the 2018 follow-up): twin
Q-functions, a tanh-squashed Gaussian policy, and an entropy coefficient tuned towards a
target entropy of -dim(A). The update follows SB3's order: temperature, critics, actor,
then the critics' targets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rlfw.algos.optim import gradient_step, step_optimizer
from rlfw.algos.qpg.base import QFunctionPolicyGradient, QpgConfig, polyak
from rlfw.buffers.replay import ReplayBatch
from rlfw.utils.checks import check_config


@dataclass
class SACConfig(QpgConfig):
    """SAC's settings (defaults: SB3's SAC)."""

    ent_coef: float | None = None
    """A fixed entropy coefficient α (none: learned, towards ``target_entropy``)."""
    ent_coef_init: float = 1.0
    """The learned α's starting value."""
    target_entropy: float | None = None
    """The entropy the learned α steers towards (none: -dim(A))."""
    target_update_interval: int = 1
    """Updates between Polyak steps of the critics' targets."""
    sde_expln: bool = False
    """gSDE (``sde_sample_freq`` > 0): the std grows as log1p(log_std) + 1 above log_std 0
    instead of exponentially (SB3's ``use_expln``)."""

    def validate(self) -> None:
        super().validate()
        check_config(
            "SACConfig",
            ent_coef=(
                self.ent_coef,
                self.ent_coef is None or self.ent_coef >= 0,
                "none (learned) or >= 0",
            ),
            ent_coef_init=(self.ent_coef_init, self.ent_coef_init > 0, "must be > 0"),
            target_update_interval=(
                self.target_update_interval,
                isinstance(self.target_update_interval, int) and self.target_update_interval >= 1,
                "must be an int >= 1",
            ),
        )


class SAC(QFunctionPolicyGradient):
    """Soft actor-critic on the common replay (see ``QFunctionPolicyGradient``)."""

    config: SACConfig

    @staticmethod
    def default_config() -> SACConfig:
        return SACConfig()

    def _setup(self) -> None:
        c, agent = self.config, self.agent
        self.actor_flat, self.actor_optimizer = self._optimizer(agent.actor)
        self.target_entropy = (
            -float(agent.action_dim) if c.target_entropy is None else c.target_entropy
        )
        # one element, not a scalar: the fused Adam step takes it as a flat parameter
        self.log_alpha = torch.full(
            (1,), float(torch.tensor(c.ent_coef_init).log()), device=agent.device
        ).requires_grad_()
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=c.learning_rate, fused=True)

    def _update(self, batch: ReplayBatch) -> dict[str, torch.Tensor]:
        c, agent = self.config, self.agent
        if agent.sde:  # SB3's gSDE: one noise matrix per update, for obs and next_obs
            matrix = self._normal(torch.Size(agent.noise_shape))
            normal: tuple[torch.Tensor, ...] = (matrix, matrix)
        else:  # one draw for the policy's actions on obs and on next_obs: [2, N, A]
            normal = self._normal(torch.Size((2, len(batch.action), agent.action_dim))).unbind()
        action, logp = agent.actor.sample(batch.observation, normal[0])
        stats: dict[str, torch.Tensor] = {}
        if c.ent_coef is None:
            alpha = self.log_alpha.detach().exp()
            alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
            self.log_alpha.grad = None
            alpha_loss.backward()
            step_optimizer(self.alpha_optimizer)
            stats["ent_coef_loss"] = alpha_loss.detach()
        else:
            alpha = torch.full((1,), c.ent_coef, device=agent.device)
        with torch.no_grad():
            next_action, next_logp = agent.actor.sample(batch.next_observation, normal[1])
            next_q = self.critic_target(batch.next_observation, next_action).min(0).values
            target = self._bootstrap(batch, next_q - alpha * next_logp)
        stats.update(self._critic_step(batch, target))
        agent.critics.requires_grad_(False)  # the actor's loss needs dQ/da only
        q_pi = agent.critics(batch.observation, action).min(0).values
        actor_loss = (alpha * logp - q_pi).mean()
        gradient_step(self.actor_optimizer, self.actor_flat, actor_loss, None)
        agent.critics.requires_grad_(True)
        if (self.updates + 1) % c.target_update_interval == 0:
            polyak(self.critic_target, agent.critics, c.tau)
        stats.update(
            actor_loss=actor_loss.detach(), ent_coef=alpha.mean(), entropy=-logp.detach().mean()
        )
        return stats

    def _state(self) -> dict[str, Any]:
        return {
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
