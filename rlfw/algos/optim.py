"""Optimisation pieces every algorithm shares: optimizer over flat parameters, gradient
step with clipping, learning-rate setting and schedule."""

from __future__ import annotations

import math
from typing import Callable, Iterable, Protocol

import torch
from torch import nn

from rlfw.algos.flat_params import FlatParameters
from rlfw.utils.checks import NonFiniteError, check_finite

OPTIMIZERS = ("adam", "rmsprop", "radam")

GradSync = Callable[[torch.Tensor], None]  # in place: a gradient made the replicas' common one


class Replicas(Protocol):
    """The learner replicas of a multi-rank run (``RankGroup``), as algorithms see them."""

    def average_gradient(self, grad: torch.Tensor) -> None:
        """In place: the mean of every replica's ``grad``, the same bits on each."""

    def all_gather(self, rows: torch.Tensor) -> torch.Tensor:
        """Every replica's ``rows`` concatenated in rank order (dim 0)."""


class OptimizerSettings(Protocol):
    """The config fields ``flat_optimizer`` reads."""

    @property
    def optimizer(self) -> str: ...

    @property
    def learning_rate(self) -> float: ...

    @property
    def optimizer_eps(self) -> float: ...


def gradient_sync(replicas: Replicas | None) -> GradSync | None:
    return None if replicas is None else replicas.average_gradient


def make_optimizer(flat: FlatParameters, name: str, lr: float, eps: float) -> torch.optim.Optimizer:
    """An optimizer over the single flat parameter (fused kernels where torch has them)."""
    if name == "adam":
        return torch.optim.Adam([flat.flat], lr=lr, eps=eps, fused=True)
    if name == "rmsprop":
        # alpha/eps as in the A3C paper and SB3's A2C (TF-style RMSprop settings).
        return torch.optim.RMSprop([flat.flat], lr=lr, alpha=0.99, eps=eps, foreach=False)
    if name == "radam":  # PQN's (Liu et al. 2020: Adam with its early variance rectified)
        return torch.optim.RAdam([flat.flat], lr=lr, eps=eps)
    raise ValueError(f"optimizer {name!r} unknown; choose from {OPTIMIZERS}")


def flat_optimizer(
    parameters: Iterable[nn.Parameter],
    config: OptimizerSettings,
    grad_sync: GradSync | None = None,
) -> tuple[FlatParameters, torch.optim.Optimizer]:
    """The flat parameter buffer and its optimizer, as every algorithm here sets them up;
    ``grad_sync`` averages gradients across replicas (see ``FlatParameters``)."""
    flat = FlatParameters(parameters, grad_sync)
    return flat, make_optimizer(flat, config.optimizer, config.learning_rate, config.optimizer_eps)


def linear_schedule(base: float, itr: int, n_itr: int, anneal: bool) -> float:
    """``base`` (a learning rate, a clip range) annealed linearly to 0 at the last iteration:
    depends only on ``itr``, so a resumed run follows the same schedule without storing
    any schedule state."""
    if not anneal:
        return base
    return base * max(1.0 - itr / max(n_itr, 1), 0.0)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def gradient_step(
    optimizer: torch.optim.Optimizer,
    flat: FlatParameters,
    loss: torch.Tensor,
    max_grad_norm: float | None,
) -> float:
    """Backward, gradient sync across replicas (if any), optional grad-norm clip, step;
    returns the pre-clip norm of the synced gradient. A non-finite loss or gradient raises
    ``NonFiniteError`` before the step is applied (on every replica alike: they all see the
    same synced gradient)."""
    flat.zero_grad()
    loss.backward()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
    flat.sync_grad()
    norm = flat.clip_grad_norm(max_grad_norm).item()
    if not math.isfinite(norm):  # a non-finite loss shows up here too, at no extra cost
        check_finite("loss", loss.detach())
        raise NonFiniteError(f"non-finite gradient norm {norm} (the loss {loss.item()} is finite)")
    step_optimizer(optimizer)
    return norm


def step_optimizer(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.step()``, with subnormal floats flushed to zero. A fused Adam over one
    tensor (every algorithm's flat parameter) goes straight to the fused kernel
    ``torch.optim.Adam`` itself calls, with the same arguments and the optimizer's own
    state: the same bits and the same ``state_dict``, without torch.optim's ~0.13 ms of
    Python per call (grouping tensors by device and dtype,
    hooks, profiler scopes), which is 5-8 % of a CartPole minibatch step here."""
    # Flush subnormals to zero for the step: a ReLU unit that stopped firing gets zero
    # gradients and Adam's first moment decays into subnormal floats, which x86 computes
    # on ~15x slower (DQN's CartPole 256-256: 29k of 68k moments subnormal, 0.86 ms a step
    # instead of 0.06). The caller's setting is restored after.
    was_flushing = _flushing_subnormals()
    torch.set_flush_denormal(True)
    try:
        if not (_fused_adam_step(optimizer) or _rmsprop_step(optimizer)):
            optimizer.step()
    finally:
        torch.set_flush_denormal(was_flushing)


_SUBNORMAL = 1e-39  # below float32's smallest normal number (1.18e-38)


def _flushing_subnormals() -> bool:
    """Whether this thread flushes subnormal floats to zero now (torch has no getter)."""
    return bool(torch.full((1,), _SUBNORMAL).mul_(1.0).item() == 0.0)


def _fused_adam_step(optimizer: torch.optim.Optimizer) -> bool:
    """The kernel call for the one case it covers; False (nothing done) otherwise."""
    kernel = getattr(torch, "_fused_adam_", None)
    if (
        type(optimizer) is not torch.optim.Adam
        or kernel is None
        or len(optimizer.param_groups) != 1
    ):
        return False
    group = optimizer.param_groups[0]
    if (
        len(group["params"]) != 1
        or not group["fused"]
        or group["amsgrad"]
        or group["differentiable"]
        or group.get("decoupled_weight_decay", False)
        or isinstance(group["lr"], torch.Tensor)
    ):
        return False
    (param,) = group["params"]
    state = optimizer.state.get(param)
    if not state or param.grad is None:  # the first step creates the state
        return False
    beta1, beta2 = group["betas"]
    with torch.no_grad():
        state["step"].add_(1)
        kernel(
            [param],
            [param.grad],
            [state["exp_avg"]],
            [state["exp_avg_sq"]],
            [],
            [state["step"]],
            amsgrad=False,
            lr=group["lr"],
            beta1=beta1,
            beta2=beta2,
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            maximize=group["maximize"],
            grad_scale=None,
            found_inf=None,
        )
    return True


_SMALLEST_NORMAL = torch.finfo(torch.float32).tiny
# sqrt(_SMALLEST_NORMAL) ~ 1.1e-19 is below half a unit in the last place of any eps from
# this on, so eps + sqrt(max(v, _SMALLEST_NORMAL)) rounds to the same float as eps + sqrt(v)
_RMSPROP_MIN_EPS = 1e-10


def _rmsprop_step(optimizer: torch.optim.Optimizer) -> bool:
    """torch's RMSprop step (not centered, no momentum) on one flat parameter, with the
    same bits and state, but the square root taken of the running average clamped to the
    smallest normal float. torch's CPU ``sqrt`` takes ~40x longer on a zero or subnormal
    element than on a normal one, and a parameter whose gradient is always zero (a weight
    on an input channel that is never set, a dead ReLU unit) keeps a zero average: on
    MinAtar's DQN that one ``sqrt`` cost 0.28 ms of a 1.82 ms gradient step. The clamp changes
    nothing once eps is added (see ``_RMSPROP_MIN_EPS``). False (nothing done) for any
    other case, and on the first step, which creates the state."""
    if type(optimizer) is not torch.optim.RMSprop or len(optimizer.param_groups) != 1:
        return False
    group = optimizer.param_groups[0]
    if (
        len(group["params"]) != 1
        or group["centered"]
        or group["momentum"] != 0
        or group["maximize"]
        or group["differentiable"]
        or group["capturable"]
        or group["eps"] < _RMSPROP_MIN_EPS
        or isinstance(group["lr"], torch.Tensor)
    ):
        return False
    (param,) = group["params"]
    state = optimizer.state.get(param)
    if not state or param.grad is None or param.dtype != torch.float32:
        return False
    with torch.no_grad():
        grad = param.grad
        state["step"] += 1
        if group["weight_decay"] != 0:
            grad = grad.add(param, alpha=group["weight_decay"])
        square_avg = state["square_avg"]
        square_avg.mul_(group["alpha"]).addcmul_(grad, grad, value=1 - group["alpha"])
        avg = square_avg.clamp_min(_SMALLEST_NORMAL).sqrt_().add_(group["eps"])
        param.addcdiv_(grad, avg, value=-group["lr"])
    return True
