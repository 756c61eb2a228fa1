"""ParallelSamplerBase: what every sampler with worker processes shares (cpu, gpu,
alternating, queue): the worker count and pinning, the start method, the pool's lifecycle,
and checkpoint state made of each worker's part plus the master's noise streams (and, where
the master runs the agent, every slot's recurrent state)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import gymnasium as gym

from rlfw.agents.base import AgentState
from rlfw.samplers.base import SamplerBase
from rlfw.samplers.machinery.noise import SlotNoise
from rlfw.samplers.machinery.workers import (
    DEFAULT_START_METHOD,
    WorkerPool,
    default_workers,
    worker_cpus,
)


class ParallelSamplerBase(SamplerBase):
    """``n_workers`` processes (default: one per usable core, at most one per env);
    ``pin_cpus`` pins worker i to the i-th usable core (``True``) or to the i-th of a list
    of cores (an affinity plan's); ``start_method`` is multiprocessing's.

    The constructor is every kind's: a kind declares only what differs, in ``_setup`` (its
    layout of slots over workers, checked once ``n_workers`` is known) and, for options of
    its own, keyword-only arguments passed on with ``**kwargs``. A kind's ``_start`` calls
    ``_start_workers(target, args)`` once its shared buffers exist; ``_release`` frees what
    it made beside the pool. Streams the master draws action noise from go in
    ``self.noise`` so that they travel with checkpoints."""

    def __init__(
        self,
        env_factory: Callable[[bool], gym.Env],
        batch_T: int,
        batch_B: int,
        seed: int = 0,
        n_workers: int | None = None,
        n_eval_envs: int = 4,
        pin_cpus: bool | Sequence[int] = False,
        start_method: str = DEFAULT_START_METHOD,
        debug: bool = False,
        n_eval_workers: int = 0,
    ):
        super().__init__(
            env_factory, batch_T, batch_B, seed, n_eval_envs, debug, n_eval_workers, start_method
        )
        self.n_workers = (
            n_workers if n_workers is not None else default_workers(batch_B // self.env_width or 1)
        )
        self.pin_cpus = pin_cpus
        self.pool: WorkerPool | None = None
        self.noise: list[SlotNoise] = []
        # Kinds that run inference in the master keep every slot's recurrent state here.
        self.slot_states: AgentState = None
        self._setup()

    def _setup(self) -> None:
        """A kind's own layout (slots per worker, groups), from ``n_workers``."""

    def worker_cpus(self) -> list[int | None]:
        """The core each worker is pinned to (None: not pinned)."""
        return worker_cpus(self.n_workers, self.pin_cpus)

    def _start_workers(
        self, target: Callable[..., None], args_per_worker: Sequence[tuple[Any, ...]]
    ) -> None:
        self.pool = WorkerPool(target, args_per_worker, self.start_method)

    def _state(self) -> dict[str, Any]:
        assert self.pool is not None  # running
        state: dict[str, Any] = {"workers": self.pool.call("state")}
        if self.noise:
            state["noise"] = [stream.state() for stream in self.noise]
        if self.slot_states is not None:
            state["agent_state"] = self.slot_states.clone()
        return state

    def _load_state(self, state: dict[str, Any]) -> None:
        assert self.pool is not None  # running
        self.pool.load_states(state["workers"])
        for stream, saved in zip(self.noise, state.get("noise", [])):
            stream.set_state(saved)
        if state.get("agent_state") is not None:
            assert self.slot_states is not None  # saved by a sampler of this (recurrent) agent
            self.slot_states.copy_(state["agent_state"])

    def _stop(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        self._release()

    def _release(self) -> None:
        """Free what ``_start`` made beside the pool (semaphores, queues)."""
