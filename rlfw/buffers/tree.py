"""Trees of tensors: NamedTuples (nested allowed) whose leaves are torch tensors or None.

Every buffer in rlfw is such a tree with leading dims ``[T, B]``; the helpers here allocate
one from an example step and apply indexing or copies to every leaf at once.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np
import torch

Tree = Any  # a tensor, None, or a NamedTuple of Trees


def is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def tree_map(fn: Callable[..., Any], tree: Tree, *rest: Tree) -> Tree:
    """Apply ``fn`` leaf-wise over trees of identical structure; None leaves stay None."""
    if tree is None:
        return None
    if is_namedtuple(tree):
        return type(tree)(*(tree_map(fn, *leaves) for leaves in zip(tree, *rest)))
    return fn(tree, *rest)


def tree_leaves(tree: Tree) -> list[torch.Tensor]:
    if tree is None:
        return []
    if is_namedtuple(tree):
        return [leaf for sub in tree for leaf in tree_leaves(sub)]
    return [tree]


def _as_tensor(x: Any) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    return torch.as_tensor(np.asarray(x))


def allocate(
    example: Tree, leading_dims: tuple[int, ...], shared: bool = False, debug_fill: bool = False
) -> Tree:
    """Allocate zeroed tensors shaped ``leading_dims + leaf.shape`` with each leaf's dtype.

    ``shared`` puts the storage in shared memory so worker processes can write into it;
    ``debug_fill`` writes marker values (NaN for floats, the dtype's max otherwise) so a
    reader of never-written slots gets obviously wrong numbers instead of plausible zeros.
    """
    for dim in leading_dims:
        if not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"leading_dims must be positive ints, got {leading_dims!r}")

    def alloc(leaf: Any) -> torch.Tensor:
        leaf = _as_tensor(leaf)
        out = torch.zeros(tuple(leading_dims) + tuple(leaf.shape), dtype=leaf.dtype)
        if debug_fill:
            out.fill_(_marker(leaf.dtype))
        if shared:
            out.share_memory_()
        return out

    return tree_map(alloc, example)


def _marker(dtype: torch.dtype) -> float | int | bool:
    if dtype.is_floating_point:
        return float("nan")
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).max


def tree_index(tree: Tree, index: Any) -> Tree:
    """``tree[index]`` on every leaf (views where torch indexing gives views)."""
    return tree_map(lambda x: x[index], tree)


def tree_assign(dst: Tree, index: Any, src: Tree) -> None:
    """``dst[index] = src`` on every leaf; ``dst`` leaves may be tensors or numpy arrays
    (``numpy_views``), ``src`` leaves numpy, tensors (on any device) or scalars."""
    if dst is None:
        return
    if is_namedtuple(dst):
        for d, s in zip(dst, src):
            tree_assign(d, index, s)
        return
    if isinstance(dst, np.ndarray):
        dst[index] = src.numpy(force=True) if isinstance(src, torch.Tensor) else src
    else:
        dst[index] = src if isinstance(src, torch.Tensor) else torch.as_tensor(src)


def numpy_views(tree: Tree) -> Tree:
    """numpy arrays sharing memory with a tree's CPU leaves, for writes made once per env
    step: a numpy row copy costs a fraction of a torch indexed assignment. A leaf numpy
    cannot view (bfloat16) stays a tensor; ``tree_assign`` writes either kind."""

    def view(leaf: torch.Tensor) -> np.ndarray | torch.Tensor:
        try:
            return leaf.numpy()
        except TypeError:
            return leaf

    return tree_map(view, tree)


class LeafIndexing:
    """Mixin-free helper: assign as ``__getitem__``/``__setitem__`` in a NamedTuple body so
    that ``buf[t, b]`` indexes every leaf rather than picking a field."""

    @staticmethod
    def getitem(self: NamedTuple, index: Any) -> Tree:
        return tree_index(self, index)

    @staticmethod
    def setitem(self: NamedTuple, index: Any, value: Tree) -> None:
        tree_assign(self, index, value)
