"""Common buffer interface: trees of ``[T, B]`` tensors."""

from rlfw.buffers.samples import AgentInfo, PolicyInfo, QInfo, Samples, StepInfo
from rlfw.buffers.tree import (
    allocate,
    tree_assign,
    tree_index,
    tree_leaves,
    tree_map,
    tree_take,
)

__all__ = [
    "AgentInfo",
    "PolicyInfo",
    "QInfo",
    "Samples",
    "StepInfo",
    "allocate",
    "tree_assign",
    "tree_index",
    "tree_leaves",
    "tree_map",
    "tree_take",
]
