"""All of a model's parameters and gradients as views into one contiguous buffer.

With small networks the optimizer step and grad-norm clip cost far more in per-tensor
dispatch than in arithmetic; over one flat tensor each becomes a handful of ops (about 40%
of a PPO minibatch step on CartPole-sized MLPs).
"""

from __future__ import annotations

from typing import Callable, Iterable, cast

import torch
from torch import nn


class FlatParameters:
    """Re-points every parameter's ``.data`` and ``.grad`` at slices of ``self.flat`` and
    ``self.flat.grad``; autograd then accumulates straight into the flat gradient.

    The module keeps working as usual (``state_dict``, ``load_state_dict`` copy in place);
    only moving it to another device afterwards would break the views.

    ``grad_sync`` (e.g. ``RankGroup.average_gradient``) turns the local gradient into the
    one every replica applies; with one flat buffer that is one collective per step.
    """

    def __init__(
        self,
        params: Iterable[nn.Parameter],
        grad_sync: Callable[[torch.Tensor], None] | None = None,
    ):
        self.grad_sync = grad_sync
        params = [p for p in params if p.requires_grad]
        if not params:
            raise ValueError("FlatParameters needs at least one trainable parameter")
        dtypes = {p.dtype for p in params}
        devices = {p.device for p in params}
        if len(dtypes) != 1 or len(devices) != 1:
            raise ValueError(
                f"parameters must share one dtype and device, got {dtypes} on {devices}"
            )
        total = sum(p.numel() for p in params)
        self.flat = nn.Parameter(torch.empty(total, dtype=params[0].dtype, device=params[0].device))
        self.flat.grad = torch.zeros_like(self.flat)
        offset = 0
        for p in params:
            n = p.numel()
            # Each parameter keeps its memory layout (channels-last conv weights stay
            # channels-last, so their kernels keep running in that layout).
            data = _laid_out_like(self.flat.data[offset : offset + n], p)
            data.copy_(p.data)
            p.data = data
            p.grad = _laid_out_like(self.flat.grad[offset : offset + n], p)
            offset += n

    @property
    def _grad(self) -> torch.Tensor:
        # set in ``__init__`` and only ever changed in place, never to None
        return cast(torch.Tensor, self.flat.grad)

    def zero_grad(self) -> None:
        self._grad.zero_()  # in place: the per-parameter grads are views of it

    def sync_grad(self) -> None:
        """Replace the local gradient by the replicas' common one (no-op alone)."""
        if self.grad_sync is not None:
            self.grad_sync(self._grad)

    def clip_grad_norm(self, max_norm: float | None) -> torch.Tensor:
        """Scale the gradient to at most ``max_norm`` (None: no clip); returns the norm."""
        grad = self._grad
        norm: torch.Tensor = torch.linalg.vector_norm(grad)
        if max_norm is not None:
            grad.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
        return norm


def _laid_out_like(chunk: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
    """A view of the 1-d ``chunk`` with ``param``'s shape and strides (any dense layout)."""
    if param.is_contiguous():
        return chunk.view(param.shape)
    if not _is_dense(param):
        raise ValueError(
            f"parameter of shape {tuple(param.shape)} and strides "
            f"{param.stride()} has gaps or overlaps; FlatParameters needs dense "
            "parameters"
        )
    return chunk.as_strided(param.shape, param.stride())


def _is_dense(t: torch.Tensor) -> bool:
    """Strides that cover exactly ``numel`` elements once (a permutation of a contiguous
    layout), as ``as_strided`` on a chunk of that size needs."""
    expected = 1
    for size, stride in sorted(zip(t.shape, t.stride()), key=lambda d: d[1]):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True
