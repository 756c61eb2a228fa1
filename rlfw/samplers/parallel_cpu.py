"""ParallelCpuSampler: N worker processes, each with B/N envs and its own CPU agent copy,
writing straight into the shared ``[T, B]`` buffer; one synchronisation per batch."""

from __future__ import annotations

import copy
from multiprocessing.connection import Connection
from typing import Any, Callable, cast

import gymnasium as gym
import torch

from rlfw.agents.base import Agent
from rlfw.buffers import Samples
from rlfw.samplers.base import allocate_samples
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.samplers.machinery.collector import Collector
from rlfw.samplers.machinery.env_group import EnvGroup
from rlfw.samplers.machinery.parallel_base import ParallelSamplerBase
from rlfw.samplers.machinery.workers import (
    Handler,
    serve,
    share_memory,
    split_slots,
    worker_setup,
)


def _cpu_worker(
    conn: Connection,
    env_factory: Callable[[bool], gym.Env],
    slots: range,
    seed: int,
    agent: Agent,
    buf: Samples,
    weights: dict[str, torch.Tensor],
    cpu: int | None,
) -> None:
    worker_setup(cpu)

    def make_handler() -> tuple[Handler, Callable[[], None]]:
        collector = Collector(
            EnvGroup(env_factory, slots, seed, train=True),
            agent,
            # a cast: mypy types indexing a NamedTuple as picking one of its fields
            cast(Samples, buf[:, slots.start : slots.stop]),
            seed,
        )

        def handle(command: str, payload: Any) -> Any:
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


class ParallelCpuSampler(ParallelSamplerBase):
    """Each worker owns a contiguous slice of env slots and steps it with its own agent copy.

    Weights travel through one shared-memory copy of the state dict, refreshed by the master
    before each batch. Workers, pinning and start method: ``ParallelSamplerBase``.
    """

    def _setup(self) -> None:
        self.slots = split_slots(self.batch_B, self.n_workers, self.env_width)

    def _start(self, agent: Agent) -> Samples:
        samples = allocate_samples(
            agent,
            self.observation_space(),
            self.batch_T,
            self.batch_B,
            shared=True,
            debug=self.debug,
            valid=self.env_width > 1,
        )
        self.weights = {k: share_memory(v.detach().clone()) for k, v in agent.state_dict().items()}
        cpus = self.worker_cpus()
        # A fresh copy: once an optimizer has flattened the agent's parameters into one
        # buffer they are views at odd offsets, and SIMD kernels round differently on
        # unaligned weights; workers must compute with the same layout whenever they start.
        worker_agent = copy.deepcopy(agent)
        args = [
            (self.env_factory, slots, self.seed, worker_agent, samples, self.weights, cpus[w])
            for w, slots in enumerate(self.slots)
        ]
        self._start_workers(_cpu_worker, args)
        return samples

    def _collect(self, itr: int) -> tuple[Samples, list[EpisodeInfo]]:
        assert self.agent is not None and self.samples is not None and self.pool is not None
        for key, value in self.agent.state_dict().items():
            self.weights[key].copy_(value)
        per_worker = self.pool.call("sample")
        return self.samples, [ep for eps in per_worker for ep in eps]
