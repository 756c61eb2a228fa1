"""Env steps per second of a sampler, for picking the fastest one on a machine."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Sequence, cast

import gymnasium as gym
import numpy as np

if TYPE_CHECKING:
    from rlfw.agents.base import Agent
    from rlfw.samplers.base import Sampler


def measure_steps_per_second(
    sampler: Sampler, agent: Agent, seconds: float, warmup_batches: int = 1
) -> float:
    """Initialize, run ``warmup_batches`` untimed, then whole batches for about ``seconds``;
    returns env steps per second over the timed batches. Closes the sampler."""
    try:
        sampler.initialize(agent)
        for itr in range(warmup_batches):
            sampler.obtain_samples(itr)
        per_batch = sampler.batch_T * sampler.batch_B
        batches, start = 0, time.perf_counter()
        while True:
            sampler.obtain_samples(warmup_batches + batches)
            batches += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return batches * per_batch / elapsed
    finally:
        sampler.close()


def step_envs_bare(envs: Sequence[gym.Env], seconds: float, seed: int = 0) -> int:
    """The framework-free floor a sampler is measured against: step ``envs`` (already
    reset) with uniform-random actions in a plain loop for about ``seconds``, resetting
    each as its episode ends; returns the env steps taken."""
    rng = np.random.default_rng(seed)
    n_actions = int(cast(gym.spaces.Discrete, envs[0].action_space).n)  # discrete envs only
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for env in envs:
            _, _, terminated, truncated, _ = env.step(int(rng.integers(n_actions)))
            if terminated or truncated:
                env.reset()
        steps += len(envs)
    return steps


def bare_env_rate(env_factory: Callable[[], gym.Env], n_envs: int, seconds: float) -> float:
    """Env steps/s of ``n_envs`` envs of ``env_factory`` (reset with seeds 0..n-1) stepped
    bare by ``step_envs_bare`` for about ``seconds``: the floor without any framework."""
    envs = [env_factory() for _ in range(n_envs)]
    try:
        for i, env in enumerate(envs):
            env.reset(seed=i)
        start = time.perf_counter()
        steps = step_envs_bare(envs, seconds)
        return steps / (time.perf_counter() - start)
    finally:
        for env in envs:
            env.close()
