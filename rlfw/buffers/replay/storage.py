"""Ring-buffer storage of ``[T, B]`` sampler rows for replay, full or frame-deduplicated."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import psutil
import torch
from numpy.typing import DTypeLike

from rlfw.buffers.samples import Samples
from rlfw.buffers.tree import tree_leaves, tree_map


class RowStorage:
    """``capacity`` transitions kept as ``capacity // B`` rows of the sampler's B columns.

    Rows are written in time order, so the successor of row t is row t+1 of the same column
    and n-step returns can be read off without storing next observations twice.
    ``observations(rows, cols)`` gives what the agent saw at those rows.

    ``obs_shape`` and ``obs_dtype`` are one observation array's; a nested observation
    passes ``obs_dtype=None`` and as ``obs_shape`` a dict/tuple tree of example arrays, one
    per leaf, each stored as its own array with its own dtype.

    ``shared=True`` puts every array (and the write position) in shared memory, so that a
    sampler process appends while the learner samples (the async runner; the replay's lock
    keeps a reader from seeing a half-written batch). Pickled, it travels by handle.
    """

    _obs_structure: Any = None  # nested observations only (see ``_allocate_nested``)
    keeps_final = False  # see ``keep_final_observations``

    def __init__(
        self,
        capacity: int,
        batch_B: int,
        obs_shape: Any,
        obs_dtype: np.dtype | None,
        action_shape: tuple[int, ...],
        action_dtype: np.dtype,
        shared: bool = False,
    ):
        self._shared: dict[str, torch.Tensor] | None = {} if shared else None
        if capacity < batch_B:
            raise ValueError(f"replay capacity {capacity} is smaller than batch_B={batch_B}")
        self.T = capacity // batch_B
        self.B = batch_B
        self.capacity = self.T * batch_B
        if obs_dtype is None:
            self._allocate_nested(obs_shape)
        else:
            frame_bytes = self._observation_bytes(obs_shape, np.dtype(obs_dtype))
            warn_if_too_big(frame_bytes + self.capacity * (4 + 3 + 8), "replay buffer")
            self._allocate_observations(obs_shape, np.dtype(obs_dtype))
        rows = (self.T, batch_B)
        self.action = self._zeros("action", rows + tuple(action_shape), action_dtype)
        self.reward = self._zeros("reward", rows, np.float32)
        self.terminated = self._zeros("terminated", rows, bool)
        self.truncated = self._zeros("truncated", rows, bool)
        self.bootstrap_value = self._zeros("bootstrap_value", rows, np.float32)
        self._position = self._zeros("_position", (2,), np.int64)  # cursor, rows written

    def add_array(self, name: str, shape: tuple[int, ...], dtype: DTypeLike) -> np.ndarray:
        """Keep one more zeroed array per row (``[T, B, *shape]``) as ``self.<name>``,
        shared and checkpointed like the others (a sequence replay's recurrent states)."""
        setattr(self, name, self._zeros(name, (self.T, self.B) + tuple(shape), dtype))
        array: np.ndarray = getattr(self, name)
        return array

    def keep_final_observations(self) -> None:
        """Also keep each truncated row's true final observation (``Samples.
        final_observation``), one more array per observation leaf; rows that were not
        truncated hold zeros."""
        for name, leaf in zip(self._final_names(), self._observation_arrays()):
            self.add_array(name, leaf.shape[2:], leaf.dtype)
        self.keeps_final = True

    def _observation_arrays(self) -> list[np.ndarray]:
        if self._obs_structure is not None:
            return [getattr(self, f"obs_leaf_{i}") for i in tree_leaves(self._obs_structure)]
        return [self.obs]

    def _final_names(self) -> list[str]:
        if self._obs_structure is not None:
            return [f"final_leaf_{i}" for i in tree_leaves(self._obs_structure)]
        return ["final_obs"]

    def final_observations(self, rows: np.ndarray, cols: np.ndarray) -> Any:
        """The true final observations of truncated ``rows`` (``keep_final_observations``)."""
        if self._obs_structure is not None:
            return tree_map(
                lambda i: getattr(self, f"final_leaf_{i}")[rows % self.T, cols],
                self._obs_structure,
            )
        return getattr(self, "final_obs")[rows % self.T, cols]

    def _zeros(self, name: str, shape: tuple[int, ...], dtype: DTypeLike) -> np.ndarray:
        """A zeroed array; in shared memory (a numpy view of a shared tensor) if shared."""
        array = np.zeros(shape, dtype)
        if self._shared is None:
            return array
        # torch leaves ``share_memory_`` (which returns the tensor) unannotated
        tensor: torch.Tensor = torch.from_numpy(array).share_memory_()  # type: ignore[no-untyped-call]
        self._shared[name] = tensor
        return tensor.numpy()

    def __getstate__(self) -> dict[str, Any]:
        if self._shared is None:
            return dict(vars(self))
        # shared arrays travel as their tensors (by handle), not as copies of the data
        return {k: v for k, v in vars(self).items() if k not in self._shared}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        for name, tensor in (self._shared or {}).items():
            setattr(self, name, tensor.numpy())

    @property
    def cursor(self) -> int:
        """The next row to write."""
        return int(self._position[0])

    @cursor.setter
    def cursor(self, value: int) -> None:
        self._position[0] = value

    @property
    def rows_written(self) -> int:
        """Rows appended, ever."""
        return int(self._position[1])

    @rows_written.setter
    def rows_written(self, value: int) -> None:
        self._position[1] = value

    # Observations: full copies here; FrameStorage overrides these three.
    def _observation_bytes(self, shape: tuple[int, ...], dtype: np.dtype) -> int:
        return self.capacity * int(np.prod(shape)) * dtype.itemsize

    def _allocate_observations(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.obs = self._zeros("obs", (self.T, self.B) + shape, dtype)

    def _write_observations(self, rows: np.ndarray, obs: Any) -> None:
        if self._obs_structure is not None:
            for i, leaf in enumerate(tree_leaves(obs)):
                getattr(self, f"obs_leaf_{i}")[rows] = leaf
        else:
            self.obs[rows] = obs

    def observations(self, rows: np.ndarray, cols: np.ndarray) -> Any:
        if self._obs_structure is not None:
            return tree_map(
                lambda i: getattr(self, f"obs_leaf_{i}")[rows % self.T, cols], self._obs_structure
            )
        return self.obs[rows % self.T, cols]

    # A nested observation: leaf i is the plain array attribute ``obs_leaf_<i>`` (shared,
    # pickled and checkpointed as every other array is) and ``_obs_structure`` the tree
    # with each leaf's index in its place.
    def _allocate_nested(self, example: Any) -> None:
        leaves = tree_leaves(example)
        total = sum(self.capacity * leaf.nbytes for leaf in leaves)
        warn_if_too_big(total + self.capacity * (4 + 3 + 8), "replay buffer")
        for i, leaf in enumerate(leaves):
            self.add_array(f"obs_leaf_{i}", leaf.shape, leaf.dtype)
        count = iter(range(len(leaves)))
        self._obs_structure = tree_map(lambda _: next(count), example)

    @property
    def history(self) -> int:
        """Rows before a sampled row that must still be intact (0 for full observations)."""
        return 0

    def append(self, samples: Samples) -> np.ndarray:
        """Copy a ``[T, B]`` batch in at the cursor (wrapping); returns the rows written."""
        T = samples.reward.shape[0]
        if samples.reward.shape[1] != self.B:
            raise ValueError(f"samples have B={samples.reward.shape[1]}, storage B={self.B}")
        if T > self.T:
            raise ValueError(f"a batch of T={T} rows does not fit a replay of {self.T} rows")
        rows = (self.cursor + np.arange(T)) % self.T
        self._write_observations(rows, tree_map(lambda x: x.numpy(), samples.observation))
        self.action[rows] = samples.action.numpy()
        self.reward[rows] = samples.reward.numpy()
        self.terminated[rows] = samples.terminated.numpy()
        self.truncated[rows] = samples.truncated.numpy()
        self.bootstrap_value[rows] = samples.bootstrap_value.numpy()
        if self.keeps_final:
            truncated = samples.truncated.numpy()
            finals = tree_leaves(tree_map(lambda x: x.numpy(), samples.final_observation))
            for name, final in zip(self._final_names(), finals):
                where = truncated.reshape(truncated.shape + (1,) * (final.ndim - 2))
                getattr(self, name)[rows] = np.where(where, final, 0)
        # one write publishes both: a reader never pairs a new cursor with an old count
        self._position[:] = ((self.cursor + T) % self.T, self.rows_written + T)
        return rows

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "_shared"}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = dict(state)
        if "cursor" in state:  # checkpoints written before the position became one array
            state["_position"] = np.array([state.pop("cursor"), state.pop("rows_written")])
        for key, value in state.items():
            current = getattr(self, key, None)
            if isinstance(current, np.ndarray):
                current[...] = value
            else:
                setattr(self, key, value)


class FrameStorage(RowStorage):
    """For stacked frames ``[S, H, W]``: stores each row's newest frame once and rebuilds
    the stack at sample time, so 1M Atari transitions take ~1M x 84 x 84 bytes, not 4x.

    An episode's first observation is its reset frame repeated S times (gymnasium's
    ``FrameStackObservation`` padding), so a stack never reaches back past an episode start.
    """

    def _observation_bytes(self, shape: tuple[int, ...], dtype: np.dtype) -> int:
        return self.capacity * int(np.prod(shape[1:])) * dtype.itemsize

    def keep_final_observations(self) -> None:
        raise ValueError(
            "frame-deduplicated replay keeps one frame per row and no final observations "
            "of truncated steps; set frame_dedup=false"
        )

    def _allocate_observations(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.stack = shape[0]
        self.frames = self._zeros("frames", (self.T, self.B) + tuple(shape[1:]), dtype)
        self.episode_start = self._zeros("episode_start", (self.T, self.B), bool)
        self._previous_done = np.ones(self.B, bool)  # the very first row starts an episode
        self._previous_obs: np.ndarray | None = None  # the row before the next batch

    def _write_observations(self, rows: np.ndarray, obs: np.ndarray) -> None:
        self.frames[rows] = obs[:, :, -1]

    def append(self, samples: Samples) -> np.ndarray:
        """As ``RowStorage.append``, after checking that the batch really is stacked frames:
        a batch that is not (channels of another kind, other padding) would be rebuilt
        wrong at sample time, silently, so it is refused."""
        obs = samples.observation.numpy()
        done = (samples.terminated | samples.truncated).numpy()
        starts = np.concatenate([self._previous_done[None], done[:-1]])
        if not frames_are_stacked(obs, starts, self._previous_obs):
            raise ValueError(
                f"observations of shape {tuple(obs.shape[2:])} are not a stack of frames "
                "(each one the previous shifted by one frame, an episode's first one its "
                "reset frame repeated, as gymnasium's FrameStackObservation makes them): "
                "frame-deduplicated replay would rebuild them wrong; set frame_dedup=False"
            )
        rows = super().append(samples)
        self.episode_start[rows] = starts
        self._previous_done = done[-1].copy()
        self._previous_obs = obs[-1].copy()
        return rows

    @property
    def history(self) -> int:
        return self.stack - 1

    def observations(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        S = self.stack
        window = rows[:, None] - np.arange(S - 1, -1, -1)[None, :]  # oldest .. newest
        starts = self.episode_start[window % self.T, cols[:, None]]
        # The newest episode start inside the window: frames before it are replaced by it.
        has_start = starts.any(axis=1)
        last_start = S - 1 - np.argmax(starts[:, ::-1], axis=1)
        first_valid = np.where(has_start, window[np.arange(len(rows)), last_start], window[:, 0])
        window = np.maximum(window, first_valid[:, None])
        stacks: np.ndarray = self.frames[window % self.T, cols[:, None]]
        return stacks


def frames_are_stacked(
    observation: np.ndarray, episode_start: np.ndarray, previous: np.ndarray | None = None
) -> bool:
    """Whether ``[T, B, S, ...]`` observations are frame stacks: within an episode each is
    the one before shifted by one frame (``previous``: the row before the batch, if
    known); an episode's first is its newest frame repeated S times."""
    if observation.ndim < 3 or observation.shape[2] < 2:
        return False
    starts = episode_start.astype(bool)
    newest = observation[:, :, -1:]
    padded = (observation == newest).reshape(starts.shape + (-1,)).all(-1)
    if not padded[starts].all():
        return False
    before = (
        observation[:-1] if previous is None else np.concatenate([previous[None], observation[:-1]])
    )
    later = observation[1:] if previous is None else observation
    shifted = (later[:, :, :-1] == before[:, :, 1:]).reshape(later.shape[:2] + (-1,)).all(-1)
    return bool(shifted[~starts[len(starts) - len(later) :]].all())


def warn_if_too_big(n_bytes: int, what: str) -> None:
    """Warn, before allocating, when ``n_bytes`` exceeds the memory available now."""
    available = psutil.virtual_memory().available
    if n_bytes > available:
        warnings.warn(
            f"{what} needs {n_bytes / 2**30:.1f} GiB but only "
            f"{available / 2**30:.1f} GiB is available: expect swapping or an "
            "out-of-memory kill; lower the capacity",
            ResourceWarning,
            stacklevel=3,
        )


def replay_storage(
    samples: Samples, rows: int, shared: bool = False, frame_dedup: bool | None = None
) -> RowStorage:
    """Storage of ``rows`` rows of the batch's B columns: frame-deduplicated when
    ``frame_dedup`` and the observations are uint8 ``[S, H, W]``, full rows otherwise
    (``None``: when the batch's observations are frame stacks). A uint8 ``[C, H, W]`` is
    not always a stack (MinAtar's channels are objects), so ``FrameStorage`` refuses a
    batch that is not one."""
    obs = samples.observation
    B = samples.reward.shape[1]
    action_layout = (tuple(samples.action.shape[2:]), samples.action.numpy().dtype)
    if not isinstance(obs, torch.Tensor):  # nested: one array per leaf, full rows
        if frame_dedup:
            raise ValueError(
                "frame_dedup=True stores one frame per row of a single stacked-frame "
                "observation; this observation is nested (a Dict/Tuple of leaves): set "
                "frame_dedup=false (each leaf is stored in full)"
            )
        example = tree_map(lambda x: np.zeros(x.shape[2:], x.numpy().dtype), obs)
        return RowStorage(rows * B, B, example, None, *action_layout, shared=shared)
    obs_shape, obs_dtype = tuple(obs.shape[2:]), obs.numpy().dtype
    dedup = frame_dedup is not False and len(obs_shape) == 3 and obs_dtype == np.uint8
    if dedup and frame_dedup is None:
        # Not told (a script; the launcher asks the env): the batch decides. Its first
        # row's past is unknown (a resumed run starts mid-episode), so it is not judged.
        done = (samples.terminated | samples.truncated).numpy()
        starts = np.concatenate([np.zeros((1, B), bool), done[:-1]])
        dedup = frames_are_stacked(obs.numpy(), starts)
    storage_cls = FrameStorage if dedup else RowStorage
    return storage_cls(rows * B, B, obs_shape, obs_dtype, *action_layout, shared=shared)
