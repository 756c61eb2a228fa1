"""Advantage actor-critic: one gradient step per batch (Mnih et al., 2016, synchronous)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, cast

import torch

from rlfw.agents.actor_critic import EncodedObservations
from rlfw.agents.base import Agent, Observation
from rlfw.algos.compile import COMPILE_MODES, check_compile, compile_loss
from rlfw.algos.optim import Replicas, gradient_step, linear_schedule, set_lr
from rlfw.algos.pg.base import PolicyGradient
from rlfw.algos.pg.common import (
    advantages,
    agent_info,
    common_checks,
    current_policy,
    explained_variance,
    kept,
    present_rows,
)
from rlfw.buffers import Samples, tree_map
from rlfw.utils.checks import check_config
from rlfw.utils.settings import Flag


@dataclass
class A2CConfig:
    """A2C hyper-parameters (defaults: SB3's A2C)."""

    learning_rate: Annotated[float, Flag("--lr")] = 7e-4
    """The optimizer's step size."""
    anneal_lr: bool = False
    """Decay the learning rate linearly to 0 over the run."""
    optimizer: str = "rmsprop"
    """'rmsprop' (the paper's), 'adam' or 'radam'."""
    optimizer_eps: float = 1e-5
    """The optimizer's epsilon."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 1.0
    """GAE's λ (1: plain n-step returns)."""
    value_coef: float = 0.5
    """Weight of the value loss, on the plain squared error (as PPO's: SB3's form)."""
    entropy_coef: Annotated[float, Flag("--entropy-coef")] = 0.0
    """Weight of the entropy bonus."""
    max_grad_norm: float | None = 0.5
    """Clip the gradient's global norm to this (none: no clipping)."""
    normalize_reward: bool = False
    """Scale rewards by the running std of the discounted return."""
    reward_clip: float = 10.0
    """Scaled rewards are clipped to ±this."""
    normalize_advantage: bool = False
    """Normalize advantages over the batch."""
    advantage: str = "gae"
    """The advantage estimator: 'gae', or 'vtrace' (IMPALA's targets from the learner's
    current policy and values, for batches sampled by older weights)."""
    vtrace_rho: float = 1.0
    """V-trace's ρ̄: the truncation of the importance weights in the advantages and
    temporal differences (the fixed point's policy lies between μ and π)."""
    vtrace_c: float = 1.0
    """V-trace's c̄: the truncation of the trace coefficients (how far a correction
    propagates back); gae_lambda scales them as the paper's λ."""
    compile: Annotated[bool | None, Flag("--compile", choices=COMPILE_MODES)] = None
    """torch.compile the learner's loss: on, off, or auto (none: where it pays off)."""

    def validate(self) -> None:
        check_config(
            type(self).__name__, **common_checks(self), compile=check_compile(self.compile)
        )


class A2C(PolicyGradient):
    """Synchronous advantage actor-critic: per batch, n-step (or GAE) advantages and a
    single gradient step on policy loss, value loss and entropy bonus."""

    config: A2CConfig

    @classmethod
    def default_config(cls) -> A2CConfig:
        return A2CConfig()

    def initialize(
        self, agent: Agent, n_itr: int, seed: int = 0, replicas: Replicas | None = None
    ) -> None:
        super().initialize(agent, n_itr, seed, replicas)
        self._loss = compile_loss(self._losses, self.config.compile, self.agent.model, n_itr)

    def optimize(self, samples: Samples, itr: int) -> dict[str, float]:
        c = self.config
        lr = linear_schedule(c.learning_rate, itr, self.n_itr, c.anneal_lr)
        set_lr(self.optimizer, lr)
        self.agent.train_mode()
        observation = self.agent.training_observations(samples)
        current = (
            current_policy(self.agent, samples, observation) if c.advantage == "vtrace" else None
        )
        adv, ret = advantages(samples, c, self.normalizers.reward(samples), current)
        # an agent's rows after it left its env (many agents) are no one's experience
        keep = present_rows(samples, self.recurrent, type(self).__name__)
        adv, ret = kept((adv, ret), keep)
        if c.normalize_advantage:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        if self.recurrent:  # the whole batch as B sequences from their stored states
            state = cast(torch.Tensor, samples.agent_state)  # a recurrent agent's
            loss, stats = self._loss(
                observation, samples.action, adv, ret, state[0], samples.episode_start
            )
        else:
            flat = (tree_map(lambda x: x.flatten(0, 1), observation), samples.action.flatten(0, 1))
            obs_rows, action_rows = kept(flat, keep)
            loss, stats = self._loss(obs_rows, action_rows, adv, ret)
        grad_norm = gradient_step(self.optimizer, self.flat, loss, c.max_grad_norm)
        self.normalizers.after_update(self.agent, samples)
        policy_loss, value_loss, entropy = stats.tolist()
        (value_rows,) = kept((agent_info(samples).value.flatten(),), keep)
        return {
            "train/policy_loss": policy_loss,
            "train/value_loss": value_loss,
            "train/entropy": entropy,
            "train/grad_norm": grad_norm,
            "train/learning_rate": lr,
            "train/explained_variance": explained_variance(value_rows, ret),
        }

    def _losses(
        self,
        obs: Observation | EncodedObservations,
        action: torch.Tensor,
        adv: torch.Tensor,
        ret: torch.Tensor,
        initial_state: torch.Tensor | None = None,
        episode_start: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(the loss, [policy loss, value loss, entropy]): what ``compile`` compiles."""
        c = self.config
        sequence = () if initial_state is None else (initial_state, episode_start)
        logp, entropy, value = self.agent.evaluate_actions(obs, action, *sequence)
        logp, entropy, value = logp.flatten(), entropy.flatten(), value.flatten()
        policy_loss = -(adv * logp).mean()
        value_loss = (ret - value).pow(2).mean()
        entropy_mean = entropy.mean()
        loss = policy_loss + c.value_coef * value_loss - c.entropy_coef * entropy_mean
        with torch.no_grad():
            stats = torch.stack([policy_loss, value_loss, entropy_mean])
        return loss, stats
