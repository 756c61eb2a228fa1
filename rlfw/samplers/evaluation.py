"""Evaluation episodes on separate envs, shared by all samplers."""
from __future__ import annotations

from typing import Callable

import gymnasium as gym
import numpy as np

from rlfw.envs.seeding import EVAL_NOISE
from rlfw.samplers.base import EpisodeInfo, check_positive
from rlfw.samplers.env_group import EnvGroup
from rlfw.samplers.noise import SlotNoise


class Evaluator:
    """Runs ``n_episodes`` on ``n_envs`` evaluation envs (no episodic life, no reward clip).

    Episodes are split evenly over the envs up front, so short episodes are not
    over-represented; each call ``k`` reseeds envs and noise from (seed, k), so evaluation
    never disturbs the training streams and is itself reproducible.
    """

    def __init__(self, env_factory: Callable[[bool], gym.Env], n_envs: int, seed: int):
        check_positive(n_eval_envs=n_envs)
        self.group = EnvGroup(env_factory, range(n_envs), seed, train=False)
        self.seed = seed
        self.calls = 0

    def run(self, agent, n_episodes: int, greedy: bool = True,
            max_steps: int = 1_000_000) -> list[EpisodeInfo]:
        check_positive(n_episodes=n_episodes)
        n_envs = len(self.group.slots)
        quota = np.array([n_episodes // n_envs + (i < n_episodes % n_envs) for i in range(n_envs)])
        done_count = np.zeros(n_envs, int)
        obs = self.group.reset(round_index=self.calls)
        noise = SlotNoise(self.seed, EVAL_NOISE, [self.calls * n_envs + i for i in range(n_envs)],
                          agent.noise_shape, agent.noise_kind)
        self.calls += 1
        episodes: list[EpisodeInfo] = []
        was_greedy = agent.greedy
        agent.greedy = greedy
        try:
            for _ in range(max_steps):
                active = done_count < quota
                if not active.any():
                    break
                step = agent.step(obs, noise.draw())
                result = self.group.step(agent.env_action(step.action), active)
                for ep in result.episodes:
                    if done_count[ep.slot] < quota[ep.slot]:
                        episodes.append(ep)
                        done_count[ep.slot] += 1
                obs = result.next_obs
        finally:
            agent.greedy = was_greedy
        return episodes

    def close(self) -> None:
        self.group.close()
