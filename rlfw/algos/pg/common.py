"""Pieces PPO and A2C share: optimizer, LR schedule, gradient step, diagnostics."""
from __future__ import annotations

from typing import Iterable

import torch
from torch import nn

OPTIMIZERS = ("adam", "rmsprop")


def make_optimizer(params: Iterable[nn.Parameter], name: str, lr: float,
                   eps: float) -> torch.optim.Optimizer:
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, eps=eps, foreach=True)
    if name == "rmsprop":
        # alpha/eps as in the A3C paper and SB3's A2C (TF-style RMSprop settings).
        return torch.optim.RMSprop(params, lr=lr, alpha=0.99, eps=eps, foreach=True)
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


def gradient_step(optimizer: torch.optim.Optimizer, params: list[nn.Parameter],
                  loss: torch.Tensor, max_grad_norm: float | None) -> float:
    """Backward, optional grad-norm clip, step; returns the pre-clip gradient norm."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if max_grad_norm is not None:
        norm = float(nn.utils.clip_grad_norm_(params, max_grad_norm, foreach=True))
    else:
        norm = float(torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(p.grad) for p in params if p.grad is not None])))
    optimizer.step()
    return norm


def explained_variance(pred: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var[target - pred] / Var[target]: 1 is perfect, 0 no better than a constant."""
    var = target.var()
    return float("nan") if var == 0 else float(1 - (target - pred).var() / var)


def check_config(name: str, **checks: tuple[object, bool, str]) -> None:
    """Raise ``ValueError`` for the first field whose check failed, with what is allowed."""
    for field, (value, ok, allowed) in checks.items():
        if not ok:
            raise ValueError(f"{name}.{field} = {value!r} is invalid: {allowed}")
