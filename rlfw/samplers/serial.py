"""SerialSampler: ``batch_B`` envs in this process, one batched forward pass per step."""
from __future__ import annotations

from typing import Callable

import gymnasium as gym
import numpy as np
import torch

from rlfw.buffers import Samples, allocate, tree_map
from rlfw.samplers.base import EpisodeInfo, check_positive
from rlfw.samplers.collector import Collector
from rlfw.samplers.env_group import EnvGroup
from rlfw.samplers.evaluation import Evaluator


def allocate_samples(agent, obs_space: gym.Space, batch_T: int, batch_B: int,
                     shared: bool = False, debug: bool = False) -> Samples:
    """The ``[T, B]`` buffer for this agent and observation space, from one example step."""
    example_obs = np.zeros((1,) + obs_space.shape, obs_space.dtype)
    noise = np.zeros((1,) + agent.noise_shape, np.float32)
    step = agent.step(example_obs, noise)
    # The agent's info tree (AgentInfo for actor-critics, QInfo for DQN) sets the leaves.
    example = Samples(
        observation=torch.from_numpy(example_obs[0]),
        action=step.action[0],
        reward=torch.zeros((), dtype=torch.float32),
        terminated=torch.zeros((), dtype=torch.bool),
        truncated=torch.zeros((), dtype=torch.bool),
        agent_info=tree_map(lambda x: x[0], step.info),
        bootstrap_value=torch.zeros((), dtype=torch.float32),
    )
    return allocate(example, (batch_T, batch_B), shared=shared, debug_fill=debug)


class SamplerBase:
    """What all samplers share: sizes, evaluation on master-side eval envs, ``with``."""

    def __init__(self, env_factory: Callable[[bool], gym.Env], batch_T: int, batch_B: int,
                 seed: int = 0, n_eval_envs: int = 4, debug: bool = False):
        check_positive(batch_T=batch_T, batch_B=batch_B, n_eval_envs=n_eval_envs)
        self.env_factory = env_factory
        self.batch_T, self.batch_B = batch_T, batch_B
        self.seed = seed
        self.n_eval_envs = n_eval_envs
        self.debug = debug
        self.agent = None
        self.samples: Samples | None = None
        self._evaluator: Evaluator | None = None

    @property
    def evaluator(self) -> Evaluator:
        if self._evaluator is None:
            self._evaluator = Evaluator(self.env_factory, self.n_eval_envs, self.seed)
        return self._evaluator

    def evaluate(self, n_episodes: int, greedy: bool = True) -> list[EpisodeInfo]:
        if self.agent is None:
            raise RuntimeError(f"{type(self).__name__}.initialize(agent) must be called first")
        return self.evaluator.run(self.agent, n_episodes, greedy)

    def _eval_state(self) -> int:
        return self._evaluator.calls if self._evaluator else 0

    def _load_eval_state(self, calls: int) -> None:
        if calls:
            self.evaluator.calls = calls

    def _close_evaluator(self) -> None:
        if self._evaluator is not None:
            self._evaluator.close()
            self._evaluator = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - overridden
        self._close_evaluator()


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
