"""SerialSampler: ``batch_B`` envs in this process, one batched forward pass per step."""

from __future__ import annotations

from typing import Any

from rlfw.agents.base import Agent
from rlfw.buffers import Samples
from rlfw.samplers.base import SamplerBase, allocate_samples
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.samplers.machinery.collector import Collector
from rlfw.samplers.machinery.env_group import EnvGroup


class SerialSampler(SamplerBase):
    """The reference sampler: simplest code, and the one every other sampler must match."""

    collector: Collector | None = None
    sees_whole_rows = True

    def _start(self, agent: Agent) -> Samples:
        group = EnvGroup(self.env_factory, range(self.batch_B), self.seed, train=True)
        samples = allocate_samples(
            agent,
            group.envs[0].observation_space,
            self.batch_T,
            self.batch_B,
            debug=self.debug,
            valid=group.width > 1,
        )
        self.collector = Collector(group, agent, samples, self.seed)
        return samples

    def _collect(self, itr: int) -> tuple[Samples, list[EpisodeInfo]]:
        assert self.samples is not None and self.collector is not None  # running
        return self.samples, self.collector.collect()

    def _state(self) -> dict[str, Any]:
        assert self.collector is not None  # running
        return {"collector": self.collector.state_dict()}

    def _load_state(self, state: dict[str, Any]) -> None:
        assert self.collector is not None  # running
        self.collector.load_state_dict(state["collector"])

    def _stop(self) -> None:
        if self.collector is not None:
            self.collector.group.close()
            self.collector = None
