"""Pieces PPO and A2C share: optimizer, LR schedule, gradient step, diagnostics."""
from __future__ import annotations

import torch

from rlfw.algos.flat_params import FlatParameters
from rlfw.algos.pg.gae import generalized_advantages

OPTIMIZERS = ("adam", "rmsprop")


def make_optimizer(flat: FlatParameters, name: str, lr: float,
                   eps: float) -> torch.optim.Optimizer:
    """An optimizer over the single flat parameter (fused kernels where torch has them)."""
    if name == "adam":
        return torch.optim.Adam([flat.flat], lr=lr, eps=eps, fused=True)
    if name == "rmsprop":
        # alpha/eps as in the A3C paper and SB3's A2C (TF-style RMSprop settings).
        return torch.optim.RMSprop([flat.flat], lr=lr, alpha=0.99, eps=eps, foreach=False)
    raise ValueError(f"optimizer {name!r} unknown; choose from {OPTIMIZERS}")


def linear_lr(base_lr: float, itr: int, n_itr: int, anneal: bool) -> float:
    """Linear annealing to 0 at the last iteration: depends only on ``itr``, so a resumed run
    follows the same schedule without storing any schedule state."""
    if not anneal:
        return base_lr
    return base_lr * max(1.0 - itr / max(n_itr, 1), 0.0)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def gradient_step(optimizer: torch.optim.Optimizer, flat: FlatParameters,
                  loss: torch.Tensor, max_grad_norm: float | None) -> float:
    """Backward, optional grad-norm clip, step; returns the pre-clip gradient norm."""
    flat.zero_grad()
    loss.backward()
    norm = flat.clip_grad_norm(max_grad_norm)
    optimizer.step()
    return norm.item()


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


def check_config(name: str, **checks: tuple[object, bool, str]) -> None:
    """Raise ``ValueError`` for the first field whose check failed, with what is allowed."""
    for field, (value, ok, allowed) in checks.items():
        if not ok:
            raise ValueError(f"{name}.{field} = {value!r} is invalid: {allowed}")
