"""Proximal policy optimization with clipped surrogate (Schulman et al., 2017)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from rlfw.algos.optim import (Replicas, flat_optimizer, gradient_step, gradient_sync,
                              linear_schedule, set_lr)
from rlfw.checks import check_config
from rlfw.algos.pg.common import (BatchNormalizers, advantages, common_checks,
                                  explained_variance)
from rlfw.buffers import Samples


@dataclass
class PPOConfig:
    """PPO hyper-parameters (defaults: SB3's PPO)."""

    learning_rate: float = 3e-4
    anneal_lr: bool = False        # linear decay to 0 over the run
    optimizer: str = "adam"
    optimizer_eps: float = 1e-8
    gamma: float = 0.99
    gae_lambda: float = 0.95
    epochs: int = 10               # passes over each batch
    minibatch_size: int = 64       # the last minibatch of an epoch may be smaller
    clip: float = 0.2              # surrogate clip range ε
    anneal_clip: bool = False      # linear decay of ε with the LR schedule's fraction
    value_clip: float | None = None  # clip value updates to ±this around the old value
    value_coef: float = 0.5
    entropy_coef: float = 0.0
    max_grad_norm: float | None = 0.5
    normalize_reward: bool = False    # scale by the discounted return's running std
    reward_clip: float = 10.0         # of scaled rewards
    normalize_advantage: bool = True  # per minibatch

    def validate(self) -> None:
        check_config(
            "PPOConfig", **common_checks(self),
            epochs=(self.epochs, isinstance(self.epochs, int) and self.epochs > 0,
                    "must be a positive int"),
            minibatch_size=(self.minibatch_size,
                            isinstance(self.minibatch_size, int) and self.minibatch_size > 0,
                            "must be a positive int"),
            clip=(self.clip, self.clip > 0, "must be > 0"),
            value_clip=(self.value_clip, self.value_clip is None or self.value_clip > 0,
                        "None or > 0"),
        )


class PPO:
    """Proximal policy optimization: per batch, GAE advantages, then ``epochs`` passes of
    shuffled minibatches on the clipped surrogate, (optionally clipped) value loss and
    entropy bonus. Its importance ratio against the sampling policy's log-probs also
    corrects for a lag between the sampling and the learning policy."""

    def __init__(self, config: PPOConfig | None = None):
        self.config = config or PPOConfig()
        self.config.validate()

    def initialize(self, agent, n_itr: int, seed: int = 0,
                   replicas: Replicas | None = None) -> None:
        """Bind to ``agent`` for ``n_itr`` iterations; ``replicas`` (multi-rank runs)
        average each gradient across the learner replicas."""
        self.agent = agent
        self.n_itr = n_itr
        self.flat, self.optimizer = flat_optimizer(agent.parameters(), self.config,
                                                   gradient_sync(replicas))
        self.normalizers = BatchNormalizers(self.config, replicas)
        # Minibatch order has its own stream: reproducible, and saved with checkpoints.
        self.generator = torch.Generator().manual_seed(seed)

    def optimize(self, samples: Samples, itr: int) -> dict[str, float]:
        c = self.config
        lr = linear_schedule(c.learning_rate, itr, self.n_itr, c.anneal_lr)
        set_lr(self.optimizer, lr)
        clip = linear_schedule(c.clip, itr, self.n_itr, c.anneal_clip)
        adv, ret = advantages(samples, c, self.normalizers.reward(samples))
        obs = samples.observation.flatten(0, 1)
        action = samples.action.flatten(0, 1)
        old_logp = samples.agent_info.logp.flatten()
        old_value = samples.agent_info.value.flatten()
        n = len(adv)
        mb = min(c.minibatch_size, n)
        self.agent.train_mode()
        totals = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "approx_kl": 0.0,
                  "clip_fraction": 0.0, "grad_norm": 0.0}
        n_updates = 0
        for _ in range(c.epochs):
            order = torch.randperm(n, generator=self.generator)
            for start in range(0, n, mb):
                idx = order[start:start + mb]
                stats = self._minibatch_step(obs[idx], action[idx], old_logp[idx],
                                             old_value[idx], adv[idx], ret[idx], clip)
                for key, value in stats.items():
                    totals[key] += value
                n_updates += 1
        self.normalizers.after_update(self.agent, samples)
        out = {f"train/{k}": v / n_updates for k, v in totals.items()}
        out.update({"train/learning_rate": lr, "train/clip_range": clip,
                    "train/n_updates": float(n_updates),
                    "train/explained_variance": explained_variance(old_value, ret)})
        return out

    def _minibatch_step(self, obs, action, old_logp, old_value, adv, ret,
                        clip: float) -> dict[str, float]:
        c = self.config
        if c.normalize_advantage and len(adv) > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        logp, entropy, value = self.agent.evaluate_actions(obs, action)
        log_ratio = logp - old_logp
        ratio = log_ratio.exp()
        policy_loss = -torch.min(adv * ratio, adv * ratio.clamp(1 - clip, 1 + clip)).mean()
        if c.value_clip is not None:
            clipped = old_value + (value - old_value).clamp(-c.value_clip, c.value_clip)
            value_loss = torch.max((value - ret).pow(2), (clipped - ret).pow(2)).mean()
        else:
            value_loss = (value - ret).pow(2).mean()
        entropy_mean = entropy.mean()
        loss = policy_loss + c.value_coef * value_loss - c.entropy_coef * entropy_mean
        grad_norm = gradient_step(self.optimizer, self.flat, loss, c.max_grad_norm)
        with torch.no_grad():
            approx_kl = ((ratio - 1) - log_ratio).mean()  # Schulman's low-variance estimator
            clip_fraction = ((ratio - 1).abs() > clip).float().mean()
        return {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(),
                "entropy": entropy_mean.item(), "approx_kl": float(approx_kl),
                "clip_fraction": float(clip_fraction), "grad_norm": grad_norm}

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(),
                "generator": self.generator.get_state(),
                "normalizers": self.normalizers.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.normalizers.load_state_dict(state.get("normalizers"))
