"""Env steps per second of a sampler, for picking the fastest one on a machine."""
from __future__ import annotations

import time


def measure_steps_per_second(sampler, agent, seconds: float, warmup_batches: int = 1) -> float:
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
