"""Hindsight experience replay (Andrychowicz et al., 2017) as a view of the common replay:
goals are relabelled when a minibatch is drawn, with the ``future`` strategy, and rewards
recomputed by the env's own ``compute_reward``.

Goal-conditioned envs (gymnasium-robotics' Fetch tasks and the like) observe a Dict with
``observation``, ``achieved_goal`` and ``desired_goal``. Rows of one replay column are one
env slot's steps in time order, so a transition's episode is the run of rows up to the
next done in its column; only transitions of episodes that have ended are drawn (a
relabelled goal comes from the same episode's future). A transition is relabelled with
probability ``k / (k + 1)`` (SB3's ``n_sampled_goal`` k; k = 4: 80 %): its new goal is the
achieved goal after a step drawn uniformly from itself to the episode's last.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np

from rlfw.buffers.replay.replay import PrioritizedSampling, Replay, ReplayBatch, UniformSampling
from rlfw.buffers.replay.storage import RowStorage

GOAL_KEYS = ("achieved_goal", "desired_goal")
HER_STRATEGIES = ("future",)

# (achieved goals [n, *g], desired goals [n, *g]) -> rewards [n]
GoalReward = Callable[[np.ndarray, np.ndarray], np.ndarray]


def check_goal_space(space: gym.Space[Any]) -> None:
    """A Dict observation with both goal keys, or one line saying what is missing."""
    keys = list(space.spaces) if isinstance(space, gym.spaces.Dict) else None
    if keys is None or any(k not in keys for k in GOAL_KEYS):
        raise ValueError(
            f"her=future relabels the goal of a goal-conditioned env, whose observation is a "
            f"Dict with keys {list(GOAL_KEYS)} (and usually 'observation'); this env's "
            f"observation is {space if keys is None else 'a Dict with keys ' + str(keys)}: "
            "set her=none"
        )


class EnvGoalReward:
    """The env's ``compute_reward(achieved_goal, desired_goal, info)``, from an env the
    learner makes once (picklable: it carries the factory, not the env). The infos passed
    are empty: gymnasium-robotics' rewards read only the goals."""

    def __init__(self, env_factory: Callable[[bool], gym.Env]):
        self.env_factory = env_factory
        self._env: gym.Env | None = None

    def check(self) -> None:
        """``ValueError`` when the env has no ``compute_reward``."""
        self._compute()

    def _compute(self) -> Callable[..., Any]:
        if self._env is None:
            self._env = self.env_factory(True)
        compute: object = getattr(self._env.unwrapped, "compute_reward", None)
        if not callable(compute):
            raise ValueError(
                f"her=future recomputes rewards with the env's compute_reward(achieved_goal, "
                f"desired_goal, info), and {type(self._env.unwrapped).__name__} has none: "
                "set her=none"
            )
        return compute

    def __call__(self, achieved: np.ndarray, desired: np.ndarray) -> np.ndarray:
        infos = np.array([{} for _ in range(len(achieved))])
        return np.asarray(self._compute()(achieved, desired, infos), np.float32)

    def __getstate__(self) -> dict[str, Any]:
        return {"env_factory": self.env_factory, "_env": None}


class HerReplay(Replay):
    """A ``Replay`` (1-step, uniform sampling) whose minibatches are drawn from complete
    episodes and relabelled with ``future`` goals (module docstring)."""

    def __init__(
        self,
        storage: RowStorage,
        sampling: UniformSampling | PrioritizedSampling,
        gamma: float,
        goal_reward: GoalReward,
        k: int = 4,
        seed: int = 0,
        reserve_rows: int = 0,
    ):
        if not isinstance(sampling, UniformSampling):
            raise ValueError("her=future draws transitions uniformly: set prioritized=false")
        structure = storage._obs_structure
        if not isinstance(structure, dict) or any(key not in structure for key in GOAL_KEYS):
            raise ValueError(f"her=future needs Dict observations with keys {list(GOAL_KEYS)}")
        super().__init__(storage, sampling, 1, gamma, reserve_rows)
        self.goal_reward, self.k = goal_reward, k
        self.rng = np.random.default_rng(seed)
        self._leaf = {key: structure[key] for key in GOAL_KEYS}

    def sample(self, batch_size: int) -> ReplayBatch:
        with self.lock:
            ids, ends = self._complete(batch_size)
            batch = self.batch(ids)
            self._relabel(batch, ids, ends)
            return batch

    def _complete(self, batch_size: int, tries: int = 100) -> tuple[np.ndarray, np.ndarray]:
        """``batch_size`` uniform ids of transitions whose episode has ended, and each
        one's episode-end row (unwrapped: row index counted from the oldest row)."""
        ids = np.empty(0, np.int64)
        ends = np.empty(0, np.int64)
        for _ in range(tries):
            if len(self) == 0:
                break
            drawn, _ = self.sampling.sample(self, batch_size - len(ids))
            end = self._episode_end(drawn)
            keep = end >= 0
            ids, ends = np.concatenate([ids, drawn[keep]]), np.concatenate([ends, end[keep]])
            if len(ids) == batch_size:
                return ids, ends
        raise ValueError(
            "her=future draws transitions of complete episodes only, and the replay holds "
            "none yet: learning_starts must cover at least one whole episode per env slot"
        )

    def _episode_end(self, ids: np.ndarray) -> np.ndarray:
        """The row (an offset from the oldest row) where each id's episode ends, -1 where
        it has not ended within the rows sampling sees."""
        s = self.storage
        rows, cols = ids // s.B, ids % s.B
        offset = (rows - self.oldest_row) % s.T
        newest = self._seen()[1] - 1  # the last visible row's offset
        end = np.full(len(ids), -1, np.int64)
        at = offset.copy()
        open_ = np.ones(len(ids), bool)
        while open_.any():
            row = (self.oldest_row + at) % s.T
            done = open_ & (s.terminated[row, cols] | s.truncated[row, cols])
            end[done] = at[done]
            open_ &= ~done
            at += 1
            open_ &= at <= newest
        return end

    def _relabel(self, batch: ReplayBatch, ids: np.ndarray, ends: np.ndarray) -> None:
        s = self.storage
        n = len(ids)
        rows, cols = ids // s.B, ids % s.B
        offset = (rows - self.oldest_row) % s.T
        relabel = self.rng.random(n) < self.k / (self.k + 1)
        future = offset + np.floor(self.rng.random(n) * (ends - offset + 1)).astype(np.int64)
        # the goal achieved after the future step: the next row's, or at the episode's
        # last step its true final observation (truncated) or, after a termination (no
        # final observation kept), the last step's own
        future_row = (self.oldest_row + future) % s.T
        achieved = getattr(s, f"obs_leaf_{self._leaf['achieved_goal']}")
        goal = achieved[(future_row + 1) % s.T, cols]
        last = future == ends
        truncated_end = last & s.truncated[future_row, cols]
        if truncated_end.any():
            finals = getattr(s, f"final_leaf_{self._leaf['achieved_goal']}")
            goal[truncated_end] = finals[future_row[truncated_end], cols[truncated_end]]
        terminated_end = last & ~truncated_end
        goal[terminated_end] = achieved[future_row[terminated_end], cols[terminated_end]]
        picked = np.flatnonzero(relabel)
        obs: Any = batch.observation  # Dicts (checked at construction)
        next_obs: Any = batch.next_observation
        desired = obs["desired_goal"].numpy()
        next_desired = next_obs["desired_goal"].numpy()
        desired[picked] = goal[picked]
        next_desired[picked] = goal[picked]
        next_achieved = next_obs["achieved_goal"].numpy()[picked]
        reward = batch.n_step_return.numpy()
        reward[picked] = self.goal_reward(next_achieved, goal[picked])

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "her_rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.rng.bit_generator.state = state["her_rng"]
