"""SerialSampler: ``batch_B`` envs in this process, one batched forward pass per step."""
from __future__ import annotations

from rlfw.buffers import Samples
from rlfw.samplers.base import EpisodeInfo, SamplerBase, allocate_samples
from rlfw.samplers.collector import Collector
from rlfw.samplers.env_group import EnvGroup


class SerialSampler(SamplerBase):
    """The reference sampler: simplest code, and the one every other sampler must match."""

    collector: Collector | None = None

    def initialize(self, agent) -> Samples:
        self.agent = agent
        group = EnvGroup(self.env_factory, range(self.batch_B), self.seed, train=True)
        self.samples = allocate_samples(agent, group.envs[0].observation_space,
                                        self.batch_T, self.batch_B, debug=self.debug)
        self.collector = Collector(group, agent, self.samples, self.seed)
        return self.samples

    def obtain_samples(self, itr: int) -> tuple[Samples, list[EpisodeInfo]]:
        if self.collector is None:
            raise RuntimeError("SerialSampler.initialize(agent) must be called first")
        return self.samples, self.collector.collect()

    def state_dict(self) -> dict:
        assert self.collector is not None
        return {"collector": self.collector.state_dict(), "eval_calls": self._eval_state()}

    def load_state_dict(self, state: dict) -> None:
        assert self.collector is not None
        self.collector.load_state_dict(state["collector"])
        self._load_eval_state(state["eval_calls"])

    def close(self) -> None:
        if self.collector is not None:
            self.collector.group.close()
            self.collector = None
        self._close_evaluator()
