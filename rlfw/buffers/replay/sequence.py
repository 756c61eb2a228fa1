"""Sequence replay for recurrent Q-learning (R2D2/R2D1, Kapturowski et al. 2019): the
sampler's ``[T, B]`` rows in a ring (any ``RowStorage``, frame-deduplicated for Atari),
plus the recurrent state each row started from. A sequence is ``length`` consecutive rows
of one column starting at a row whose index is a multiple of ``period`` (so sequences
overlap by ``length - period`` rows); it carries the state the sampler held at its first
row and every episode start inside it, where the learner resets the state as the sampler
did. Sequences are drawn uniformly or by priority (``alpha > 0``: P ∝ p^α)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from rlfw.buffers.replay.storage import RowStorage
from rlfw.buffers.replay.sum_tree import SumTree
from rlfw.buffers.samples import Samples


class SequenceBatch(NamedTuple):
    """``[L, N]`` sequences (``N`` drawn), time first."""

    observation: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    bootstrap_value: torch.Tensor
    episode_start: torch.Tensor   # [L, N]: the state restarts from zeros before this step
    initial_state: torch.Tensor   # [N, S]: the sampler's state before the first step
    weight: torch.Tensor          # [N] importance weights (1 for uniform)
    index: np.ndarray             # [N] sequence ids, for priority updates


class SequenceReplay:
    """``append_samples(samples)`` (with ``samples.agent_state``) and
    ``sample(batch_size) -> SequenceBatch`` of ``length``-row sequences."""

    def __init__(self, storage: RowStorage, state_size: int, length: int, period: int,
                 alpha: float = 0.0, beta: float = 0.4, eps: float = 1e-6, seed: int = 0):
        if not 1 <= period <= length:
            raise ValueError(f"period must be in [1, length={length}], got {period}")
        if storage.T % period or storage.T < 2 * length:
            raise ValueError(f"replay rows per column ({storage.T}) must be a multiple of "
                             f"period={period} and at least 2 x length={length}")
        self.storage, self.length, self.period = storage, length, period
        self.alpha, self.beta, self.eps = alpha, beta, eps
        self.agent_state = np.zeros((storage.T, storage.B, state_size), np.float32)
        self.episode_start = np.zeros((storage.T, storage.B), bool)
        self._previous_done = np.zeros(storage.B, bool)
        self.slots = storage.T // period       # sequence starts per column
        self.tree = SumTree(self.slots * storage.B)
        self.max_priority = 1.0
        self.rng = np.random.default_rng(seed)
        self.obs_shape = _obs_shape(storage)

    # -- writing ----------------------------------------------------------------------------
    def append_samples(self, samples: Samples) -> None:
        if samples.agent_state is None:
            raise ValueError("sequence replay needs samples from a recurrent agent "
                             "(samples.agent_state is None)")
        before = self.storage.rows_written
        rows = self.storage.append(samples)
        self.agent_state[rows] = samples.agent_state.numpy()
        done = (samples.terminated | samples.truncated).numpy()
        self.episode_start[rows[0]] = self._previous_done
        self.episode_start[rows[1:]] = done[:-1]
        self._previous_done = done[-1].copy()
        self._update_starts(before, self.storage.rows_written)

    def _update_starts(self, before: int, after: int) -> None:
        """Starts whose whole sequence is now written get the max priority; starts whose
        rows were overwritten get none."""
        T, B = self.storage.T, self.storage.B
        cols = np.arange(B)

        def starts(lo: int, hi: int) -> np.ndarray:  # absolute start rows in [lo, hi)
            first = -(-max(lo, 0) // self.period) * self.period
            return np.arange(first, max(hi, first), self.period)

        # complete now, not before: start + length in (before, after]
        new = starts(before - self.length + 1, after - self.length + 1)
        new = new[new >= after - T]
        # overwritten: start < after - T (they began in rows the ring has reused)
        gone = starts(before - T, after - T)
        for absolute, value in ((gone, 0.0), (new, self.max_priority ** self.alpha)):
            ids = ((absolute % T // self.period)[:, None] * B + cols[None, :]).reshape(-1)
            self.tree.update(ids, np.full(len(ids), value))

    # -- reading ----------------------------------------------------------------------------
    def __len__(self) -> int:
        """Sequences that can be drawn."""
        return int(np.count_nonzero(self.tree.get(np.arange(self.slots * self.storage.B))))

    def sample(self, batch_size: int) -> SequenceBatch:
        if self.tree.total <= 0:
            raise ValueError(f"replay holds no complete sequence of {self.length} rows yet")
        ids = self.tree.sample(batch_size, self.rng)
        probs = self.tree.get(ids) / self.tree.total
        weights = (len(self) * probs) ** (-self.beta)
        return self.batch(ids, (weights / weights.max()).astype(np.float32))

    def batch(self, ids: np.ndarray, weights: np.ndarray | None = None) -> SequenceBatch:
        s = self.storage
        start, cols = ids // s.B * self.period, ids % s.B
        rows = (start[None, :] + np.arange(self.length)[:, None]) % s.T   # [L, N]
        cols_lt = np.broadcast_to(cols, rows.shape)
        episode_start = self.episode_start[rows, cols_lt].copy()
        episode_start[0] = False  # the stored initial state is already the reset one
        weights = np.ones(len(ids), np.float32) if weights is None else weights
        return SequenceBatch(
            observation=torch.from_numpy(s.observations(rows.reshape(-1), cols_lt.reshape(-1))
                                         .reshape(rows.shape + self.obs_shape)),
            action=torch.from_numpy(s.action[rows, cols_lt]),
            reward=torch.from_numpy(s.reward[rows, cols_lt]),
            terminated=torch.from_numpy(s.terminated[rows, cols_lt]),
            truncated=torch.from_numpy(s.truncated[rows, cols_lt]),
            bootstrap_value=torch.from_numpy(s.bootstrap_value[rows, cols_lt]),
            episode_start=torch.from_numpy(episode_start),
            initial_state=torch.from_numpy(self.agent_state[start % s.T, cols]),
            weight=torch.from_numpy(np.asarray(weights, np.float32)),
            index=ids)

    def update_priorities(self, ids: np.ndarray, priorities: np.ndarray) -> None:
        """Sequence priorities (R2D2: η max|δ| + (1 - η) mean|δ|, made by the learner)."""
        priorities = np.abs(priorities) + self.eps
        self.max_priority = max(self.max_priority, float(priorities.max()))
        self.tree.update(ids, priorities ** self.alpha)

    # -- checkpoints ------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"storage": self.storage.state_dict(), "agent_state": self.agent_state,
                "episode_start": self.episode_start, "previous_done": self._previous_done,
                "tree": self.tree.nodes.copy(), "max_priority": self.max_priority,
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.storage.load_state_dict(state["storage"])
        self.agent_state[:] = state["agent_state"]
        self.episode_start[:] = state["episode_start"]
        self._previous_done = np.array(state["previous_done"])
        self.tree.nodes[:] = state["tree"]
        self.max_priority = state["max_priority"]
        self.rng.bit_generator.state = state["rng"]


def _obs_shape(storage: RowStorage) -> tuple[int, ...]:
    """One observation's shape in ``storage``."""
    return tuple(storage.observations(np.zeros(1, np.int64), np.zeros(1, np.int64)).shape[1:])
