"""Trees of tensors: NamedTuples, dicts and tuples (nested allowed) whose leaves are torch
tensors (or numpy arrays) or None.

Every buffer in rlfw is such a tree with leading dims ``[T, B]``; the helpers here allocate
one from an example step and apply indexing or copies to every leaf at once. A gymnasium
``Dict`` observation is a dict node and a ``Tuple`` observation a tuple node, so a nested
observation is one more subtree of the buffer, each leaf in its own block of memory.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np
import torch

Tree = Any  # a tensor, None, or a NamedTuple / dict / tuple of Trees


def is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def tree_map(fn: Callable[..., Any], tree: Tree, *rest: Tree) -> Tree:
    """Apply ``fn`` leaf-wise over trees of identical structure; None leaves stay None."""
    if isinstance(tree, torch.Tensor):  # the common leaf first: learners call this per step
        return fn(tree, *rest)
    if tree is None:
        return None
    if isinstance(tree, dict):
        return {key: tree_map(fn, tree[key], *(r[key] for r in rest)) for key in tree}
    if is_namedtuple(tree):
        return type(tree)(*(tree_map(fn, *leaves) for leaves in zip(tree, *rest)))
    if isinstance(tree, tuple):
        return tuple(tree_map(fn, *leaves) for leaves in zip(tree, *rest))
    return fn(tree, *rest)


def tree_leaves(tree: Tree) -> list[Any]:
    """The leaves in a fixed order (dict keys in insertion order, which gymnasium's
    ``Dict`` space keeps sorted)."""
    if tree is None:
        return []
    if isinstance(tree, dict):
        return [leaf for sub in tree.values() for leaf in tree_leaves(sub)]
    if isinstance(tree, tuple):
        return [leaf for sub in tree for leaf in tree_leaves(sub)]
    return [tree]


def tree_paths(tree: Tree, prefix: str = "") -> list[tuple[str, Any]]:
    """``(path, leaf)`` pairs, the path as a user would name the leaf: ``image``,
    ``robot.joints``, ``1`` (a Tuple's index); a bare leaf's path is ``""``."""
    if isinstance(tree, dict):
        items: Any = tree.items()
    elif is_namedtuple(tree):
        items = zip(tree._fields, tree)
    elif isinstance(tree, tuple):
        items = enumerate(tree)
    else:
        return [(prefix, tree)]
    out = []
    for key, sub in items:
        out += tree_paths(sub, f"{prefix}.{key}" if prefix else str(key))
    return out


def tree_unbind(tree: Tree, dim: int = 0) -> list[Tree]:
    """``tensor.unbind(dim)`` for a tree: a list of trees, one per index of ``dim``."""
    leaves = tree_leaves(tree)
    if not leaves:
        raise ValueError("cannot unbind a tree without leaves")
    n = leaves[0].shape[dim]
    return [tree_map(lambda x, i=i: x.select(dim, i), tree) for i in range(n)]


def tree_stack(trees: list[Tree]) -> Tree:
    """numpy arrays stacked leaf-wise along a new first axis."""
    return tree_map(lambda *xs: np.stack(xs), *trees)


def tree_copy(tree: Tree) -> Tree:
    """A copy of every numpy/tensor leaf (env observations are reused by some envs)."""
    return tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else np.array(x), tree)


def tree_from_numpy(tree: Tree) -> Tree:
    """``torch.from_numpy`` on every leaf (shares memory)."""
    return tree_map(torch.from_numpy, tree)


def tree_to(tree: Tree, device: torch.device | str) -> Tree:
    """Every leaf as a tensor on ``device`` (numpy leaves converted)."""
    return tree_map(lambda x: torch.as_tensor(x, device=device), tree)


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
            out.share_memory_()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
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
    if isinstance(tree, torch.Tensor):
        return tree[index]
    return tree_map(lambda x: x[index], tree)


def tree_take(tree: Tree, index: torch.Tensor, dim: int = 0, out: Tree = None) -> Tree:
    """Every leaf's entries at the int64 ``index`` along ``dim`` (``index_select``): the
    rows ``tree_index(tree, index)`` gives, as one copy per leaf, into ``out``'s leaves if
    given (a tree of the result's structure and shapes). Advanced indexing gathers element
    by element (a [1024, 7, 7, 3] uint8 leaf: ~14x longer on the reference machine); and
    a fresh result of a few MB is fresh pages, whose first touch costs more than the copy."""
    if out is None:
        return tree_map(lambda x: x.index_select(dim, index), tree)
    return tree_map(lambda x, o: torch.index_select(x, dim, index, out=o), tree, out)


def tree_assign(dst: Tree, index: Any, src: Tree) -> None:
    """``dst[index] = src`` on every leaf; ``dst`` leaves may be tensors or numpy arrays
    (``numpy_views``), ``src`` leaves numpy, tensors (on any device) or scalars."""
    if dst is None:
        return
    if isinstance(dst, dict):
        for key, d in dst.items():
            tree_assign(d, index, src[key])
        return
    if isinstance(dst, tuple):
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
