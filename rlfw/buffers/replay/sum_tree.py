"""Sum-tree over leaf priorities: O(log N) proportional sampling and batched updates."""

from __future__ import annotations

import numpy as np


class SumTree:
    """A complete binary tree in one array: node i has children 2i and 2i+1, the root is 1,
    leaves sit at ``[size, 2 * size)``. Every operation takes a batch of leaves at once."""

    def __init__(self, n_leaves: int):
        if n_leaves <= 0:
            raise ValueError(f"n_leaves must be positive, got {n_leaves}")
        self.n_leaves = n_leaves
        self.size = 1 << max(int(np.ceil(np.log2(n_leaves))), 0)
        self.depth = int(np.log2(self.size))
        self.nodes = np.zeros(2 * self.size, dtype=np.float64)

    @property
    def total(self) -> float:
        return float(self.nodes[1])

    def get(self, leaves: np.ndarray) -> np.ndarray:
        priorities: np.ndarray = self.nodes[np.asarray(leaves) + self.size]
        return priorities

    def update(self, leaves: np.ndarray, priorities: np.ndarray) -> None:
        """Set leaf priorities (non-negative) and re-sum their ancestors, level by level."""
        leaves = np.asarray(leaves, dtype=np.int64)
        priorities = np.asarray(priorities, dtype=np.float64)
        if np.any(priorities < 0) or not np.all(np.isfinite(priorities)):
            raise ValueError("priorities must be finite and non-negative")
        if len(leaves) == 0:
            return
        idx = leaves + self.size
        self.nodes[idx] = priorities  # with duplicate leaves, the last write wins
        idx = np.unique(idx // 2)
        while idx[0] >= 1:
            self.nodes[idx] = self.nodes[2 * idx] + self.nodes[2 * idx + 1]
            if idx[0] == 1:
                break
            idx = np.unique(idx // 2)

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Leaves drawn proportionally to priority, one per equal slice of the total mass
        (stratified, which lowers the variance of a batch)."""
        total = self.total
        if total <= 0:
            raise ValueError("cannot sample: every priority is zero")
        targets = (np.arange(batch_size) + rng.random(batch_size)) * (total / batch_size)
        idx = np.ones(batch_size, dtype=np.int64)
        for _ in range(self.depth):
            left = self.nodes[2 * idx]
            go_right = targets >= left
            targets = np.where(go_right, targets - left, targets)
            idx = 2 * idx + go_right
        leaves = idx - self.size
        # Float round-off can land on a zero-priority leaf at a slice edge; step back.
        bad = self.nodes[idx] <= 0
        if bad.any():
            leaves[bad] = self._nearest_positive(leaves[bad])
        return leaves

    def _nearest_positive(self, leaves: np.ndarray) -> np.ndarray:
        positive = np.flatnonzero(self.nodes[self.size : self.size + self.n_leaves] > 0)
        pos = np.clip(np.searchsorted(positive, leaves), 0, len(positive) - 1)
        return positive[pos]
