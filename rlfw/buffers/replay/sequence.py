"""Sequence replay for recurrent Q-learning (R2D2/R2D1, Kapturowski et al. 2019): the
sampler's ``[T, B]`` rows in a ring (any ``RowStorage``, frame-deduplicated for Atari),
plus the recurrent state each row started from. A sequence is ``length`` consecutive rows
of one column starting at a row whose index is a multiple of ``period`` (so sequences
overlap by ``length - period`` rows); it carries the state the sampler held at its first
row and every episode start inside it, where the learner resets the state as the sampler
did. Sequences are drawn uniformly or by priority (``alpha > 0``: P ∝ p^α)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any, NamedTuple, Protocol, cast

import numpy as np
import torch

from rlfw.buffers.replay.storage import RowStorage
from rlfw.buffers.replay.sum_tree import SumTree
from rlfw.buffers.samples import Samples
from rlfw.buffers.tree import tree_map


class SequenceBatch(NamedTuple):
    """``[L, N]`` sequences (``N`` drawn), time first."""

    observation: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    bootstrap_value: torch.Tensor
    episode_start: torch.Tensor  # [L, N]: the state restarts from zeros before this step
    initial_state: torch.Tensor  # [N, S]: the sampler's state before the first step
    weight: torch.Tensor  # [N] importance weights (1 for uniform)
    # [N] sequence ids, for priority updates (the field hides ``tuple.index``: mypy flags it)
    index: np.ndarray  # type: ignore[assignment]


class _SequenceArrays(Protocol):
    """The arrays ``SequenceWriter`` adds to its storage (``RowStorage.add_array``)."""

    agent_state: np.ndarray
    episode_start: np.ndarray
    last_done: np.ndarray


class SequenceWriter:
    """Appends ``[T, B]`` batches with their recurrent states to the storage (from this
    process or, for the async runner, from the sampler process: everything it writes lives
    in the storage's arrays, shared when the storage is)."""

    def __init__(self, storage: RowStorage, state_size: int):
        self.storage = storage
        storage.add_array("agent_state", (state_size,), np.float32)
        storage.add_array("episode_start", (), bool)
        # row 0 only: each column's latest done; the first row written starts an episode
        # (frame storage rebuilds its stacks from these flags: the reset frame repeated)
        storage.add_array("last_done", (), bool)[0] = True

    @property
    def rows_written(self) -> int:
        return self.storage.rows_written

    def append(self, samples: Samples) -> np.ndarray:
        if samples.agent_state is None:
            raise ValueError(
                "sequence replay needs samples from a recurrent agent (samples.agent_state is None)"
            )
        s = self.storage
        arrays = cast(_SequenceArrays, s)
        previous = arrays.last_done[0].copy()
        rows = s.append(samples)
        arrays.agent_state[rows] = samples.agent_state.numpy()
        done = (samples.terminated | samples.truncated).numpy()
        arrays.episode_start[rows[0]] = previous
        arrays.episode_start[rows[1:]] = done[:-1]
        arrays.last_done[0] = done[-1]
        return rows


class SequenceReplay:
    """``append_samples(samples)`` (with ``samples.agent_state``) and
    ``sample(batch_size) -> SequenceBatch`` of ``length``-row sequences. With
    ``reserve_rows`` another process may write up to that many rows ahead (``writer``);
    ``reveal(rows_written)`` then tells sampling which rows it may use."""

    def __init__(
        self,
        storage: RowStorage,
        state_size: int,
        length: int,
        period: int,
        alpha: float = 0.0,
        beta: float = 0.4,
        eps: float = 1e-6,
        seed: int = 0,
        reserve_rows: int = 0,
    ):
        if not 1 <= period <= length:
            raise ValueError(f"period must be in [1, length={length}], got {period}")
        window = storage.T - reserve_rows
        if storage.T % period or reserve_rows % period or window < 2 * length:
            raise ValueError(
                f"replay rows per column ({storage.T}, {reserve_rows} of them "
                f"reserved) must be multiples of period={period}, leaving at "
                f"least 2 x length={length}"
            )
        self.storage, self.length, self.period = storage, length, period
        self.window = window
        self.alpha, self.beta, self.eps = alpha, beta, eps
        self.writer = SequenceWriter(storage, state_size)
        self.slots = storage.T // period  # sequence starts per column
        self.tree = SumTree(self.slots * storage.B)
        self.max_priority = 1.0
        self.rng = np.random.default_rng(seed)
        self.visible_rows = 0  # rows sampling knows of
        self.lock: AbstractContextManager[object, None] = nullcontext()

    # -- writing ----------------------------------------------------------------------------
    def append_samples(self, samples: Samples) -> None:
        with self.lock:
            self.writer.append(samples)
        self.reveal(self.storage.rows_written)

    def reveal(self, rows_written: int) -> None:
        """Sampling may use the rows up to ``rows_written``: sequences now complete get the
        max priority; those whose rows (or frame history) left the window get none."""
        before, self.visible_rows = self.visible_rows, rows_written
        self._update_starts(before, rows_written)

    def _update_starts(self, before: int, after: int) -> None:
        T, B = self.storage.T, self.storage.B
        cols = np.arange(B)

        def starts(lo: int, hi: int) -> np.ndarray:  # absolute start rows in [lo, hi)
            first = -(-max(lo, 0) // self.period) * self.period
            return np.arange(first, max(hi, first), self.period)

        def oldest(written: int) -> int:  # the first start whose rows and frame history
            return written - self.window + self.storage.history  # are in the window

        # complete now, not before: start + length in (before, after]
        new = starts(before - self.length + 1, after - self.length + 1)
        new = new[new >= oldest(after)]
        # out of the window now, not before
        gone = starts(oldest(before), oldest(after))
        for absolute, value in ((gone, 0.0), (new, self.max_priority**self.alpha)):
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
        with self.lock:
            return self.batch(ids, (weights / weights.max()).astype(np.float32))

    def batch(self, ids: np.ndarray, weights: np.ndarray | None = None) -> SequenceBatch:
        s = self.storage
        arrays = cast(_SequenceArrays, s)
        start, cols = ids // s.B * self.period, ids % s.B
        rows = (start[None, :] + np.arange(self.length)[:, None]) % s.T  # [L, N]
        cols_lt = np.broadcast_to(cols, rows.shape)
        episode_start = arrays.episode_start[rows, cols_lt].copy()
        episode_start[0] = False  # the stored initial state is already the reset one
        weights = np.ones(len(ids), np.float32) if weights is None else weights
        return SequenceBatch(
            observation=tree_map(
                lambda leaf: torch.from_numpy(leaf.reshape(rows.shape + leaf.shape[1:])),
                s.observations(rows.reshape(-1), cols_lt.reshape(-1)),
            ),
            action=torch.from_numpy(s.action[rows, cols_lt]),
            reward=torch.from_numpy(s.reward[rows, cols_lt]),
            terminated=torch.from_numpy(s.terminated[rows, cols_lt]),
            truncated=torch.from_numpy(s.truncated[rows, cols_lt]),
            bootstrap_value=torch.from_numpy(s.bootstrap_value[rows, cols_lt]),
            episode_start=torch.from_numpy(episode_start),
            initial_state=torch.from_numpy(arrays.agent_state[start % s.T, cols].copy()),
            weight=torch.from_numpy(np.asarray(weights, np.float32)),
            index=ids,
        )

    def update_priorities(self, ids: np.ndarray, priorities: np.ndarray) -> None:
        """Sequence priorities (R2D2: η max|δ| + (1 - η) mean|δ|, made by the learner)."""
        priorities = np.abs(priorities) + self.eps
        self.max_priority = max(self.max_priority, float(priorities.max()))
        self.tree.update(ids, priorities**self.alpha)

    # -- checkpoints ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        with self.lock:  # a shared storage keeps changing: copy it while it holds still
            storage = {
                k: v.copy() if isinstance(v, np.ndarray) else v
                for k, v in self.storage.state_dict().items()
            }
        return {
            "storage": storage,
            "tree": self.tree.nodes.copy(),
            "max_priority": self.max_priority,
            "rng": self.rng.bit_generator.state,
            "visible_rows": self.visible_rows,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with self.lock:
            self.storage.load_state_dict(state["storage"])
        self.tree.nodes[:] = state["tree"]
        self.max_priority = state["max_priority"]
        self.rng.bit_generator.state = state["rng"]
        self.visible_rows = state["visible_rows"]
