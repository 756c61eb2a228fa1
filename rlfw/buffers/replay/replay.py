"""Replay = storage + sampling rule + n-step view; appends ``[T, B]`` sampler batches."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any, NamedTuple, Protocol

import numpy as np
import torch

from rlfw.buffers.replay.storage import RowStorage
from rlfw.buffers.replay.sum_tree import SumTree
from rlfw.buffers.samples import Samples
from rlfw.buffers.tree import tree_from_numpy, tree_map


class ReplayBatch(NamedTuple):
    """A sampled batch; the TD target is ``n_step_return + bootstrap_discount *
    (next_value if next_value_known else V_target(next_observation))``."""

    observation: torch.Tensor
    action: torch.Tensor
    n_step_return: torch.Tensor
    bootstrap_discount: torch.Tensor  # gamma^k, or 0 after a termination
    next_observation: torch.Tensor
    next_value_known: torch.Tensor  # truncated: V(true final obs) stored by the sampler
    # (a storage that keeps final observations puts the truncated step's true final
    # observation in next_observation instead, and next_value_known is False)
    next_value: torch.Tensor
    weight: torch.Tensor  # importance weight (1 for uniform sampling)
    # flat ids, for priority updates (the field hides ``tuple.index``, which mypy flags)
    index: np.ndarray  # type: ignore[assignment]


class UniformSampling:
    """Every valid transition equally likely."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def on_append(self, replay: "Replay", rows: np.ndarray) -> None:
        pass

    def on_reveal(self, replay: "Replay", added: np.ndarray, removed: np.ndarray) -> None:
        pass

    def sample(self, replay: "Replay", batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        first, stop = replay.valid_range()
        picks = self.rng.integers((stop - first) * replay.storage.B, size=batch_size)
        rows = (replay.oldest_row + first + picks // replay.storage.B) % replay.storage.T
        ids = rows * replay.storage.B + picks % replay.storage.B
        return ids, np.ones(batch_size, np.float32)

    def update(self, ids: np.ndarray, td_errors: np.ndarray) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]


class PrioritizedSampling:
    """Proportional prioritization (Schaul et al., 2016): P(i) ∝ p_i^α, importance weights
    (N P(i))^-β normalised by the batch maximum; new transitions get the max priority."""

    def __init__(self, alpha: float = 0.6, beta: float = 0.4, eps: float = 1e-6, seed: int = 0):
        if not 0 <= alpha <= 1 or not 0 <= beta <= 1:
            raise ValueError(f"alpha and beta must be in [0, 1], got alpha={alpha}, beta={beta}")
        self.alpha, self.beta, self.eps = alpha, beta, eps
        self.rng = np.random.default_rng(seed)
        self.tree: SumTree | None = None
        self.max_priority = 1.0

    def on_append(self, replay: "Replay", rows: np.ndarray) -> None:
        s = replay.storage
        if self.tree is None:
            self.tree = SumTree(s.T * s.B)
        cols = np.arange(s.B)
        # Rows not (yet or any more) sampleable get priority 0: the newest n (no n-step
        # lookahead) and, for frame storage, the oldest whose history was overwritten.
        valid = np.zeros(s.T, bool)
        valid[(replay.oldest_row + replay.valid_offsets()) % s.T] = True
        touched = np.unique(
            np.concatenate(
                [rows, (rows - replay.n_step) % s.T, (rows[-1] + 1 + np.arange(s.history)) % s.T]
            )
        )
        ids = (touched[:, None] * s.B + cols[None, :]).reshape(-1)
        now_valid = np.repeat(valid[touched], s.B)
        was_zero = self.tree.get(ids) == 0
        new = np.where(
            now_valid, np.where(was_zero, self.max_priority**self.alpha, self.tree.get(ids)), 0.0
        )
        self.tree.update(ids, new)

    def on_reveal(self, replay: "Replay", added: np.ndarray, removed: np.ndarray) -> None:
        """Rows ``added`` to what sampling sees get the max priority, rows ``removed``
        (out of the window, or without their frame history) none."""
        s = replay.storage
        if self.tree is None:
            self.tree = SumTree(s.T * s.B)
        cols = np.arange(s.B)
        for rows, value in ((removed, 0.0), (added, self.max_priority**self.alpha)):
            ids = (rows[:, None] * s.B + cols[None, :]).reshape(-1)
            self.tree.update(ids, np.full(len(ids), value))

    def sample(self, replay: "Replay", batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        assert self.tree is not None
        ids = self.tree.sample(batch_size, self.rng)
        probs = self.tree.get(ids) / self.tree.total
        n_valid = len(replay)
        weights = (n_valid * probs) ** (-self.beta)
        return ids, (weights / weights.max()).astype(np.float32)

    def update(self, ids: np.ndarray, td_errors: np.ndarray) -> None:
        assert self.tree is not None
        priorities = np.abs(td_errors) + self.eps
        self.max_priority = max(self.max_priority, float(priorities.max()))
        self.tree.update(ids, priorities**self.alpha)

    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": self.rng.bit_generator.state,
            "beta": self.beta,
            "max_priority": self.max_priority,
            "tree": None if self.tree is None else self.tree.nodes.copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.beta, self.max_priority = state["beta"], state["max_priority"]
        if state["tree"] is not None:
            self.tree = SumTree((len(state["tree"]) // 2))
            self.tree.nodes[:] = state["tree"]


class ReplayWriter(Protocol):
    """What another process (the async runner's sampler) appends batches with."""

    @property
    def rows_written(self) -> int: ...

    def append(self, samples: Samples) -> np.ndarray: ...


class ReplayBuffer(Protocol):
    """What runners and samplers use of any replay (``Replay``, R2D1's ``SequenceReplay``):
    appending, the writer of a process that appends ahead, ``reveal`` of what it wrote,
    the lock both sides take, the sampleable size and checkpoints."""

    lock: AbstractContextManager[object, None]

    @property
    def writer(self) -> ReplayWriter: ...

    def append_samples(self, samples: Samples) -> None: ...

    def reveal(self, rows_written: int) -> None: ...

    def __len__(self) -> int: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class Replay:
    """``append_samples([T, B] Samples)`` and ``sample(batch_size) -> ReplayBatch`` with
    n-step returns computed at sample time: a termination stops the sum with no bootstrap,
    a truncation stops it and bootstraps from the sampler's V(true final observation)."""

    def __init__(
        self,
        storage: RowStorage,
        sampling: UniformSampling | PrioritizedSampling,
        n_step: int = 1,
        gamma: float = 0.99,
        reserve_rows: int = 0,
    ):
        if not isinstance(n_step, int) or n_step < 1:
            raise ValueError(f"n_step must be an integer >= 1, got {n_step!r}")
        if not 0 <= reserve_rows < storage.T:
            raise ValueError(f"reserve_rows={reserve_rows} must be in [0, {storage.T})")
        self.window = storage.T - reserve_rows  # rows the sampling sees, at most
        if n_step >= self.window:
            raise ValueError(f"n_step={n_step} needs a replay of more than {n_step} rows")
        self.storage, self.sampling = storage, sampling
        self.n_step, self.gamma = n_step, gamma
        # Rows appended that sampling may see (None: all). The async runner's learner shows
        # only the batches it has been told of, while the sampler process writes ahead into
        # the ``reserve_rows`` beyond the window: the rows a minibatch can draw are then the
        # same whatever the timing, so async runs repeat bitwise.
        self.visible_rows: int | None = None
        # Held while appending and while gathering a minibatch: with a shared storage (the
        # async runner) the sampler process appends while the learner samples.
        self.lock: AbstractContextManager[object, None] = nullcontext()

    def _seen(self) -> tuple[int, int]:
        """(rows written that sampling sees, how many of them are still in the window)."""
        written = self.storage.rows_written
        if self.visible_rows is not None:
            written = min(written, self.visible_rows)
        return written, min(written, self.window)

    @property
    def oldest_row(self) -> int:
        written, held = self._seen()
        return (written - held) % self.storage.T

    def valid_range(self) -> tuple[int, int]:
        """``[first, stop)`` offsets from ``oldest_row`` of the rows that can be sampled: not
        the newest ``n_step`` (no lookahead yet), nor, once the window has moved on, the
        oldest rows whose frame history may be overwritten."""
        return self._range(self._seen()[0])

    def _range(self, written: int) -> tuple[int, int]:
        held = min(written, self.window)
        first = self.storage.history if written > self.window else 0
        return first, max(held - self.n_step, first)

    def _valid_rows(self, written: int) -> np.ndarray:
        """The storage rows sampling may draw once ``written`` rows are visible."""
        oldest = written - min(written, self.window)
        return (oldest + np.arange(*self._range(written))) % self.storage.T

    def reveal(self, rows_written: int) -> None:
        """Let sampling see the rows another process appended, up to ``rows_written`` (the
        async learner, per batch it is told of): prioritized sampling gives the rows that
        became sampleable the max priority and drops those that left the window, all in
        this process, so priorities follow only the learner's sequence of batches."""
        before = self._valid_rows(self.visible_rows or 0)
        self.visible_rows = rows_written
        after = self._valid_rows(rows_written)
        self.sampling.on_reveal(self, np.setdiff1d(after, before), np.setdiff1d(before, after))

    def valid_offsets(self) -> np.ndarray:
        return np.arange(*self.valid_range())

    def __len__(self) -> int:
        first, stop = self.valid_range()
        return (stop - first) * self.storage.B

    @property
    def writer(self) -> RowStorage:
        """What another process appends batches with (``append``, ``rows_written``): the
        storage; sampling learns of the rows through ``reveal``."""
        return self.storage

    def append_samples(self, samples: Samples) -> None:
        with self.lock:
            rows = self.storage.append(samples)
        self.sampling.on_append(self, rows)

    def sample(self, batch_size: int) -> ReplayBatch:
        with self.lock:
            if len(self) == 0:
                raise ValueError(
                    "replay holds no sampleable transitions yet (each needs "
                    f"{self.n_step} later steps stored)"
                )
            ids, weights = self.sampling.sample(self, batch_size)
            return self.batch(ids, weights)

    def batch(self, ids: np.ndarray, weights: np.ndarray | None = None) -> ReplayBatch:
        s = self.storage
        rows, cols = ids // s.B, ids % s.B
        n = len(ids)
        ret = np.zeros(n, np.float64)
        discount = np.ones(n, np.float64)
        open_ = np.ones(n, bool)  # still summing rewards
        known = np.zeros(n, bool)
        known_value = np.zeros(n, np.float32)
        next_rows = rows + self.n_step
        final_rows = rows
        for k in range(self.n_step):
            r = (rows + k) % s.T
            ret += np.where(open_, discount * s.reward[r, cols], 0.0)
            term = open_ & s.terminated[r, cols]
            trunc = open_ & s.truncated[r, cols]
            discount = np.where(open_, discount * self.gamma, discount)
            discount[term] = 0.0
            known |= trunc
            known_value = np.where(trunc, s.bootstrap_value[r, cols], known_value)
            final_rows = np.where(trunc, r, final_rows)
            next_rows = np.where(term | trunc, rows, next_rows)  # any valid row; unused
            open_ &= ~(term | trunc)
        weights = np.ones(n, np.float32) if weights is None else weights
        next_observation = s.observations(next_rows % s.T, cols)  # a copy: ours to change
        if s.keeps_final and known.any():
            picked = np.flatnonzero(known)
            finals = s.final_observations(final_rows[picked], cols[picked])
            tree_map(lambda a, f: a.__setitem__(picked, f), next_observation, finals)
            known[:] = False  # bootstrapped by the learner from the final observation
        return ReplayBatch(
            observation=tree_from_numpy(s.observations(rows, cols)),
            action=torch.from_numpy(s.action[rows, cols]),
            n_step_return=torch.from_numpy(ret.astype(np.float32)),
            bootstrap_discount=torch.from_numpy(discount.astype(np.float32)),
            next_observation=tree_from_numpy(next_observation),
            next_value_known=torch.from_numpy(known),
            next_value=torch.from_numpy(known_value),
            weight=torch.from_numpy(np.asarray(weights, np.float32)),
            index=ids,
        )

    def update_priorities(self, ids: np.ndarray, td_errors: np.ndarray) -> None:
        self.sampling.update(ids, td_errors)

    def state_dict(self) -> dict[str, Any]:
        with self.lock:  # a shared storage keeps changing: copy it while it holds still
            storage = self.storage.state_dict()
            if self.storage._shared is not None:
                storage = {
                    k: v.copy() if isinstance(v, np.ndarray) else v for k, v in storage.items()
                }
        return {
            "storage": storage,
            "sampling": self.sampling.state_dict(),
            "visible_rows": self.visible_rows,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with self.lock:
            self.storage.load_state_dict(state["storage"])
        self.sampling.load_state_dict(state["sampling"])
        self.visible_rows = state.get("visible_rows")
