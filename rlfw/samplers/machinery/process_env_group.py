"""ProcessEnvGroup: the ``EnvGroup`` interface with the envs split over worker processes, so
evaluation steps its envs on other cores while the master only runs batched inference
(instead of serializing everything on the master's core while sampler workers idle)."""

from __future__ import annotations

from multiprocessing.connection import Connection
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np

from rlfw.buffers.tree import Tree, tree_assign, tree_copy, tree_index, tree_map
from rlfw.envs.multiagent import columns_of
from rlfw.samplers.machinery.env_group import EnvGroup, StepResult
from rlfw.samplers.machinery.workers import (
    DEFAULT_START_METHOD,
    Handler,
    WorkerPool,
    serve,
    split_slots,
    worker_setup,
)


def _group_worker(
    conn: Connection,
    env_factory: Callable[[bool], gym.Env],
    slots: range,
    seed: int,
    train: bool,
) -> None:
    worker_setup(None)

    def make_handler() -> tuple[Handler, Callable[[], None]]:
        group = EnvGroup(env_factory, slots, seed, train=train)

        def handle(command: str, payload: Any) -> Any:
            if command == "reset":
                return tree_copy(group.reset(payload))
            if command == "step":
                actions, active = payload
                r = group.step(actions, active)
                return (
                    tree_copy(r.next_obs),
                    r.reward.copy(),
                    r.terminated.copy(),
                    r.truncated.copy(),
                    r.episodes,
                )
            if command == "reset_slot":
                group.reset_slot(payload)  # restarts the slot's whole env: send its rows
                first = payload - payload % group.width
                return tree_copy(
                    tree_index(group.result.next_obs, slice(first, first + group.width))
                )
            raise ValueError(f"unknown command {command!r}")

        return handle, group.close

    serve(conn, make_handler)


def _concatenate(*parts: np.ndarray) -> np.ndarray:
    return np.concatenate(parts)


class ProcessEnvGroup:
    """Env slots ``range(n)`` stepped by ``n_workers`` processes; same seeds, same results
    and same ``StepResult`` as an in-process ``EnvGroup`` of those slots."""

    def __init__(
        self,
        env_factory: Callable[[bool], gym.Env],
        n: int,
        seed: int,
        n_workers: int,
        train: bool = False,
        start_method: str = DEFAULT_START_METHOD,
    ):
        self.slots = list(range(n))
        probe = env_factory(train)
        try:
            space, self.width = probe.observation_space, columns_of(probe)
        finally:
            probe.close()
        self.parts = split_slots(n, min(n_workers, n // self.width), self.width)
        self.pool = WorkerPool(
            _group_worker, [(env_factory, part, seed, train) for part in self.parts], start_method
        )
        self.result = StepResult(n, space)

    def reset(self, round_index: int = 0) -> Tree:
        obs = self.pool.call("reset", [round_index] * len(self.parts))
        tree_assign(self.result.next_obs, slice(None), tree_map(_concatenate, *obs))
        return self.result.next_obs

    def step(
        self, actions: np.ndarray, active: np.ndarray | Sequence[bool] | None = None
    ) -> StepResult:
        mask = np.ones(len(self.slots), bool) if active is None else np.asarray(active)
        answers = self.pool.call(
            "step", [(actions[p.start : p.stop], mask[p.start : p.stop]) for p in self.parts]
        )
        r = self.result
        r.episodes = []
        for part, (obs, reward, terminated, truncated, episodes) in zip(self.parts, answers):
            sl = slice(part.start, part.stop)
            tree_assign(r.next_obs, sl, obs)
            r.reward[sl] = reward
            r.terminated[sl], r.truncated[sl] = terminated, truncated
            r.episodes += episodes
        return r

    def reset_slot(self, i: int) -> None:
        w = next(w for w, part in enumerate(self.parts) if i in part)
        self.pool.send_one(w, "reset_slot", i - self.parts[w].start)
        first = i - i % self.width
        tree_assign(self.result.next_obs, slice(first, first + self.width), self.pool.receive(w))

    def close(self) -> None:
        self.pool.close()
