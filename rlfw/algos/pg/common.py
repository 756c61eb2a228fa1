"""Pieces PPO and A2C share: optimizer, LR schedule, gradient step, diagnostics."""
from __future__ import annotations

import torch

from rlfw.algos.flat_params import FlatParameters

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


def check_config(name: str, **checks: tuple[object, bool, str]) -> None:
    """Raise ``ValueError`` for the first field whose check failed, with what is allowed."""
    for field, (value, ok, allowed) in checks.items():
        if not ok:
            raise ValueError(f"{name}.{field} = {value!r} is invalid: {allowed}")
