"""A group of env slots stepped together with same-step reset; used by every sampler
(the serial sampler holds one group, a parallel worker holds one per process)."""

from __future__ import annotations

from typing import Any, Callable, Sequence, cast

import gymnasium as gym
import numpy as np

from rlfw.buffers.tree import Tree, tree_assign, tree_copy, tree_paths
from rlfw.envs.multiagent import ColumnsEnv, columns_of
from rlfw.envs.spaces import leaf_keys, observation_rows
from rlfw.envs.state import dumps_envs, loads_envs
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.utils.seeding import EVAL_ENV, TRAIN_ENV, derive_seed


class StepResult:
    """Preallocated per-step outputs of a group (arrays reused every step). ``next_obs``
    has the observation space's structure: one array, or a dict/tuple tree of arrays (one
    per leaf, each with its dtype)."""

    def __init__(self, n: int, observation_space: gym.Space[Any]):
        self.next_obs: Tree = observation_rows(observation_space, n)
        # nested: each leaf's row block and the keys that reach it in an observation,
        # walked flat each step (a recursive tree walk per env costs more than the copies)
        self._leaves = (
            [
                (block, leaf_keys(observation_space, path))
                for path, block in tree_paths(self.next_obs)
            ]
            if not isinstance(self.next_obs, np.ndarray)
            else []
        )
        self.reward = np.zeros(n, np.float32)
        self.terminated = np.zeros(n, bool)
        self.truncated = np.zeros(n, bool)
        # whether each column's agent is in its env at ``next_obs`` (one-agent envs: always)
        self.present = np.ones(n, bool)
        self.final_obs: dict[int, Any] = {}  # local index -> true last obs (truncated)
        self.episodes: list[EpisodeInfo] = []

    def write_obs(self, i: int, obs: Any) -> None:
        """Row ``i`` of ``next_obs`` := ``obs`` (any structure the space has)."""
        if not self._leaves:
            self.next_obs[i] = obs  # the common case, kept to one numpy row copy
            return
        for block, keys in self._leaves:
            leaf = obs
            for key in keys:
                leaf = leaf[key]
            block[i] = leaf


class EnvGroup:
    """Env slots ``slots`` (global indices), seeded from (seed, purpose, slot).

    ``step`` resets an env the same step it ends; ``next_obs`` then holds the new episode's
    first observation, and the true final observation of a *truncated* episode is kept in
    ``final_obs`` so the sampler can bootstrap from it (terminated ones need none).

    A many-agent env (``ColumnsEnv``) fills ``width`` consecutive slots, one per agent, and
    is seeded from its first slot; ``slots`` then holds whole envs (samplers split slots
    in multiples of the width: ``split_slots``).
    """

    def __init__(
        self,
        env_factory: Callable[[bool], gym.Env],
        slots: Sequence[int],
        seed: int,
        train: bool = True,
    ):
        self.slots = list(slots)
        self.seed = seed
        self.train = train
        first = env_factory(train)
        self.width = columns_of(first)
        if len(self.slots) % self.width:
            first.close()
            raise ValueError(
                f"{len(self.slots)} slots do not hold whole envs of {self.width} agents "
                f"each: use a multiple of {self.width} (batch_B and each worker's share)"
            )
        self.envs = [first] + [env_factory(train) for _ in range(len(self.slots) // self.width - 1)]
        self.result = StepResult(len(self.slots), first.observation_space)

    def _write_rows(self, e: int, rows: Any) -> None:
        """Env ``e``'s columns of ``next_obs`` and ``present``, from its rows."""
        for j, obs in enumerate(rows):
            self.result.write_obs(e * self.width + j, obs)
        env = cast(ColumnsEnv, self.envs[e])
        self.result.present[e * self.width : (e + 1) * self.width] = env.present

    def reset(self, round_index: int = 0) -> Tree:
        """Seeded reset of every env; returns the observations (also in ``result.next_obs``)."""
        purpose = TRAIN_ENV if self.train else EVAL_ENV
        for e, env in enumerate(self.envs):
            slot = self.slots[e * self.width]
            obs, _ = env.reset(seed=derive_seed(self.seed, purpose, round_index, slot))
            if self.width == 1:
                self.result.write_obs(e, obs)
            else:
                self._write_rows(e, obs)
        return self.result.next_obs

    def reset_slot(self, i: int) -> None:
        """Start a new episode in the env of local slot ``i`` (unseeded: its RNG continues;
        a many-agent env restarts all its columns)."""
        e = i // self.width
        obs = self.envs[e].reset()[0]
        if self.width == 1:
            self.result.write_obs(i, obs)
        else:
            self._write_rows(e, obs)

    def step(
        self, actions: np.ndarray, active: np.ndarray | Sequence[bool] | None = None
    ) -> StepResult:
        r = self.result
        r.final_obs = {}
        r.episodes = []
        if self.width > 1:
            return self._step_columns(actions, active)
        for i, env in enumerate(self.envs):
            if active is not None and not active[i]:
                continue
            obs, reward, terminated, truncated, info = env.step(actions[i])
            r.reward[i] = reward
            r.terminated[i] = terminated
            r.truncated[i] = truncated and not terminated  # terminated wins: no bootstrap
            if "episode" in info:
                ep = info["episode"]
                success = info.get("is_success")
                r.episodes.append(
                    EpisodeInfo(
                        float(ep["r"]),
                        int(ep["l"]),
                        self.slots[i],
                        success=None if success is None else float(success),
                    )
                )
            if terminated or truncated:
                if r.truncated[i]:
                    r.final_obs[i] = tree_copy(obs)
                obs, _ = env.reset()
            r.write_obs(i, obs)
        return r

    def _step_columns(
        self, actions: np.ndarray, active: np.ndarray | Sequence[bool] | None
    ) -> StepResult:
        """``step`` for many-agent envs: each env takes its columns' actions at once."""
        r, w = self.result, self.width
        for e, env in enumerate(self.envs):
            cols = slice(e * w, (e + 1) * w)
            if active is not None and not active[e * w]:
                continue
            rows, reward, terminated, truncated, info = cast(ColumnsEnv, env).step(actions[cols])
            r.reward[cols] = reward
            r.terminated[cols] = terminated
            r.truncated[cols] = truncated & ~terminated
            for j in np.flatnonzero(r.truncated[cols]):
                r.final_obs[e * w + int(j)] = tree_copy(rows[j])
            if "episode" in info:  # every agent is done: one team episode
                ep = info["episode"]
                r.episodes.append(EpisodeInfo(float(ep["r"]), int(ep["l"]), self.slots[e * w]))
                rows, _ = env.reset()
            self._write_rows(e, rows)
        return r

    def state_dict(self) -> dict[str, Any]:
        return {"envs": dumps_envs(self.envs), "obs": tree_copy(self.result.next_obs)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.close()
        self.envs = loads_envs(state["envs"])
        tree_assign(self.result.next_obs, slice(None), state["obs"])
        if self.width > 1:
            for e, env in enumerate(self.envs):
                cols = slice(e * self.width, (e + 1) * self.width)
                self.result.present[cols] = cast(ColumnsEnv, env).present

    def close(self) -> None:
        for env in self.envs:
            env.close()
