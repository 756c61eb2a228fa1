"""Common buffer interface: trees of ``[T, B]`` tensors."""
from rlfw.buffers.samples import AgentInfo, Samples
from rlfw.buffers.tree import allocate, tree_assign, tree_index, tree_leaves, tree_map

__all__ = ["AgentInfo", "Samples", "allocate", "tree_assign", "tree_index", "tree_leaves",
           "tree_map"]
