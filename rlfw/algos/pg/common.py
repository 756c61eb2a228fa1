"""Pieces PPO and A2C share: config checks, advantages, diagnostics."""
from __future__ import annotations

import torch

from rlfw.algos.optim import OPTIMIZERS
from rlfw.algos.pg.gae import generalized_advantages


def explained_variance(pred: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var[target - pred] / Var[target]: 1 is perfect, 0 no better than a constant."""
    var = target.var()
    return float("nan") if var == 0 else float(1 - (target - pred).var() / var)


def common_checks(config) -> dict[str, tuple[object, bool, str]]:
    """Checks every policy-gradient config shares (see ``check_config``)."""
    c = config
    return dict(
        learning_rate=(c.learning_rate, c.learning_rate > 0, "must be > 0"),
        optimizer=(c.optimizer, c.optimizer in OPTIMIZERS, f"one of {OPTIMIZERS}"),
        gamma=(c.gamma, 0 <= c.gamma <= 1, "must be in [0, 1]"),
        gae_lambda=(c.gae_lambda, 0 <= c.gae_lambda <= 1, "must be in [0, 1]"),
        max_grad_norm=(c.max_grad_norm, c.max_grad_norm is None or c.max_grad_norm > 0,
                       "None or > 0"),
    )


def advantages(samples, config) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE advantages and returns of a ``Samples`` batch, flattened to ``[T * B]``."""
    adv, ret = generalized_advantages(samples.reward, samples.agent_info.value,
                                      samples.terminated, samples.truncated,
                                      samples.bootstrap_value, config.gamma, config.gae_lambda)
    return adv.flatten(), ret.flatten()


