"""SerialSampler: ``batch_B`` envs in this process, one batched forward pass per step."""
from __future__ import annotations

from typing import Callable

import gymnasium as gym
import numpy as np
import torch

from rlfw.buffers import AgentInfo, Samples, allocate
from rlfw.envs.seeding import ACTION_NOISE
from rlfw.samplers.base import EpisodeInfo, check_positive
from rlfw.samplers.env_group import EnvGroup
from rlfw.samplers.evaluation import Evaluator
from rlfw.samplers.noise import SlotNoise


def allocate_samples(agent, obs_space: gym.Space, batch_T: int, batch_B: int,
                     shared: bool = False, debug: bool = False) -> Samples:
    """The ``[T, B]`` buffer for this agent and observation space, from one example step."""
    example_obs = np.zeros((1,) + obs_space.shape, obs_space.dtype)
    noise = np.zeros((1,) + agent.noise_shape, np.float32)
    step = agent.step(example_obs, noise)
    example = Samples(
        observation=torch.from_numpy(example_obs[0]),
        action=step.action[0],
        reward=torch.zeros((), dtype=torch.float32),
        terminated=torch.zeros((), dtype=torch.bool),
        truncated=torch.zeros((), dtype=torch.bool),
        agent_info=AgentInfo(*(x[0] for x in step.info)),
        bootstrap_value=torch.zeros((), dtype=torch.float32),
    )
    return allocate(example, (batch_T, batch_B), shared=shared, debug_fill=debug)


class SerialSampler:
    """The reference sampler: simplest code, and the one every other sampler must match."""

    def __init__(self, env_factory: Callable[[bool], gym.Env], batch_T: int, batch_B: int,
                 seed: int = 0, n_eval_envs: int = 4, debug: bool = False):
        check_positive(batch_T=batch_T, batch_B=batch_B, n_eval_envs=n_eval_envs)
        self.env_factory = env_factory
        self.batch_T, self.batch_B = batch_T, batch_B
        self.seed = seed
        self.n_eval_envs = n_eval_envs
        self.debug = debug
        self.group: EnvGroup | None = None
        self.evaluator: Evaluator | None = None
        self.samples: Samples | None = None

    def initialize(self, agent) -> Samples:
        self.agent = agent
        self.group = EnvGroup(self.env_factory, range(self.batch_B), self.seed, train=True)
        self.obs = self.group.reset().copy()
        self.noise = SlotNoise(self.seed, ACTION_NOISE, range(self.batch_B), agent.noise_shape,
                               agent.noise_kind)
        self.samples = allocate_samples(agent, self.group.envs[0].observation_space,
                                        self.batch_T, self.batch_B, debug=self.debug)
        return self.samples

    def obtain_samples(self, itr: int) -> tuple[Samples, list[EpisodeInfo]]:
        if self.samples is None or self.group is None:
            raise RuntimeError("SerialSampler.initialize(agent) must be called first")
        buf, agent, group = self.samples, self.agent, self.group
        agent.sample_mode()
        episodes: list[EpisodeInfo] = []
        buf.bootstrap_value.zero_()
        for t in range(self.batch_T):
            buf.observation[t] = torch.from_numpy(self.obs)
            step = agent.step(buf.observation[t], self.noise.draw())
            buf.action[t] = step.action
            buf.agent_info[t] = step.info
            result = group.step(agent.env_action(step.action))
            buf.reward[t] = torch.from_numpy(result.reward)
            buf.terminated[t] = torch.from_numpy(result.terminated)
            buf.truncated[t] = torch.from_numpy(result.truncated)
            if result.final_obs:
                idx = sorted(result.final_obs)
                final = np.stack([result.final_obs[i] for i in idx])
                buf.bootstrap_value[t, idx] = agent.value(final).float()
            episodes.extend(result.episodes)
            self.obs[:] = result.next_obs
        last = self.batch_T - 1
        open_end = ~(buf.terminated[last] | buf.truncated[last])
        if open_end.any():
            buf.bootstrap_value[last] = torch.where(open_end, agent.value(self.obs).float(),
                                                    buf.bootstrap_value[last])
        return buf, episodes

    def evaluate(self, n_episodes: int, greedy: bool = True) -> list[EpisodeInfo]:
        if self.evaluator is None:
            self.evaluator = Evaluator(self.env_factory, self.n_eval_envs, self.seed)
        return self.evaluator.run(self.agent, n_episodes, greedy)

    def state_dict(self) -> dict:
        assert self.group is not None
        return {"group": self.group.state_dict(), "obs": self.obs.copy(),
                "noise": self.noise.state(),
                "eval_calls": self.evaluator.calls if self.evaluator else 0}

    def load_state_dict(self, state: dict) -> None:
        assert self.group is not None
        self.group.load_state_dict(state["group"])
        self.obs[:] = state["obs"]
        self.noise.set_state(state["noise"])
        if state["eval_calls"]:
            self.evaluate_calls_restore(state["eval_calls"])

    def evaluate_calls_restore(self, calls: int) -> None:
        if self.evaluator is None:
            self.evaluator = Evaluator(self.env_factory, self.n_eval_envs, self.seed)
        self.evaluator.calls = calls

    def close(self) -> None:
        for part in (self.group, self.evaluator):
            if part is not None:
                part.close()
        self.group = self.evaluator = None

    def __enter__(self) -> "SerialSampler":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
