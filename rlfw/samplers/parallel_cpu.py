"""ParallelCpuSampler: N worker processes, each with B/N envs and its own CPU agent copy,
writing straight into the shared ``[T, B]`` buffer; one synchronisation per batch."""
from __future__ import annotations

from typing import Callable

import gymnasium as gym
import torch

from rlfw.buffers import Samples
from rlfw.samplers.base import EpisodeInfo, SamplerBase, allocate_samples, check_positive
from rlfw.samplers.collector import Collector
from rlfw.samplers.env_group import EnvGroup
from rlfw.samplers.workers import (WorkerPool, default_workers, serve, worker_cpus,
                                  worker_setup)


def split_slots(batch_B: int, n_workers: int) -> list[range]:
    """Contiguous slot ranges, sizes differing by at most one."""
    check_positive(n_workers=n_workers)
    if n_workers > batch_B:
        raise ValueError(f"n_workers={n_workers} exceeds batch_B={batch_B}: each worker "
                         "needs at least one env")
    base, extra = divmod(batch_B, n_workers)
    bounds, start = [], 0
    for w in range(n_workers):
        size = base + (w < extra)
        bounds.append(range(start, start + size))
        start += size
    return bounds


def _cpu_worker(conn, env_factory, slots: range, seed: int, agent, buf: Samples,
                weights: dict[str, torch.Tensor], cpu: int | None) -> None:
    worker_setup(cpu)

    def make_handler():
        collector = Collector(EnvGroup(env_factory, slots, seed, train=True), agent,
                              buf[:, slots.start:slots.stop], seed)

        def handle(command: str, payload):
            if command == "sample":
                agent.load_state_dict(weights)  # the master refreshed them for this batch
                return collector.collect()
            if command == "state":
                return collector.state_dict()
            if command == "load":
                return collector.load_state_dict(payload)
            raise ValueError(f"unknown command {command!r}")

        return handle, collector.group.close

    serve(conn, make_handler)


class ParallelCpuSampler(SamplerBase):
    """Each worker owns a contiguous slice of env slots and steps it with its own agent copy.

    Weights travel through one shared-memory copy of the state dict, refreshed by the master
    before each batch. ``n_workers`` defaults to the number of usable cores; ``pin_cpus``
    pins worker i to the i-th usable core.
    """

    def __init__(self, env_factory: Callable[[bool], gym.Env], batch_T: int, batch_B: int,
                 seed: int = 0, n_workers: int | None = None, n_eval_envs: int = 4,
                 pin_cpus: bool = False, start_method: str = "spawn", debug: bool = False):
        super().__init__(env_factory, batch_T, batch_B, seed, n_eval_envs, debug)
        self.n_workers = n_workers if n_workers is not None else default_workers(batch_B)
        self.slots = split_slots(batch_B, self.n_workers)
        self.pin_cpus = pin_cpus
        self.start_method = start_method
        self.pool: WorkerPool | None = None

    def initialize(self, agent) -> Samples:
        self.agent = agent
        self.samples = allocate_samples(agent, self.observation_space(), self.batch_T,
                                        self.batch_B, shared=True, debug=self.debug)
        self.weights = {k: v.detach().clone().share_memory_()
                        for k, v in agent.state_dict().items()}
        cpus = worker_cpus(len(self.slots), self.pin_cpus)
        args = [(self.env_factory, slots, self.seed, agent, self.samples, self.weights, cpus[w])
                for w, slots in enumerate(self.slots)]
        self.pool = WorkerPool(_cpu_worker, args, self.start_method)
        return self.samples

    def obtain_samples(self, itr: int) -> tuple[Samples, list[EpisodeInfo]]:
        if self.pool is None:
            raise RuntimeError("ParallelCpuSampler.initialize(agent) must be called first")
        for key, value in self.agent.state_dict().items():
            self.weights[key].copy_(value)
        per_worker = self.pool.call("sample")
        return self.samples, [ep for eps in per_worker for ep in eps]

    def state_dict(self) -> dict:
        assert self.pool is not None
        return {"workers": self.pool.call("state"), "eval_calls": self._eval_state()}

    def load_state_dict(self, state: dict) -> None:
        assert self.pool is not None
        self.pool.load_states(state["workers"])
        self._load_eval_state(state["eval_calls"])

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        self._close_evaluator()
