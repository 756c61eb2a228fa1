"""Env state for checkpoints: the envs pickled whole, without the wall clock.

gymnasium's ``RecordEpisodeStatistics`` keeps when the current episode started and how long
the last ones took (``perf_counter`` readings). rlfw reads only returns and lengths, and a
checkpoint must be a function of the run, not of the machine's speed: two identical runs
write identical files. So the clock fields are blanked while pickling and the episode clock
restarts when envs are loaded (only the unused ``info["episode"]["t"]`` of the episodes in
progress then counts from the resume)."""

from __future__ import annotations

import pickle
import time
from collections import deque
from typing import Iterator, Sequence

import gymnasium as gym


def _episode_statistics(envs: Sequence[gym.Env]) -> Iterator[gym.wrappers.RecordEpisodeStatistics]:
    for env in envs:
        layer = env
        while isinstance(layer, gym.Wrapper):
            if isinstance(layer, gym.wrappers.RecordEpisodeStatistics):
                yield layer
            layer = layer.env


def dumps_envs(envs: Sequence[gym.Env]) -> bytes:
    """The envs pickled, with every episode-statistics clock blanked."""
    stats = list(_episode_statistics(envs))
    clocks = [(s.episode_start_time, s.time_queue) for s in stats]
    for s in stats:
        s.episode_start_time, s.time_queue = 0.0, deque(maxlen=s.time_queue.maxlen)
    try:
        return pickle.dumps(envs)
    finally:
        for s, (start, queue) in zip(stats, clocks):
            s.episode_start_time, s.time_queue = start, queue


def loads_envs(blob: bytes) -> list[gym.Env]:
    """Envs from ``dumps_envs``; their episode clocks restart now."""
    envs: list[gym.Env] = pickle.loads(blob)
    now = time.perf_counter()
    for s in _episode_statistics(envs):
        s.episode_start_time = now
    return envs
