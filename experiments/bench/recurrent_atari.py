"""What the recurrent core costs on Pong, feed-forward vs CNN+LSTM side by side in one run.

Rows: sampling steps/s with the cpu and native samplers (PPO's Nature-CNN agent, 8 envs x
128 steps, 2 workers/threads), and the time of one PPO update (4 epochs of 4 minibatches,
the Atari preset) on the same ``[128, 8]`` batch; each as recurrent / feed-forward.
Goals (issue 19): sampling >= 0.8x, an update <= 1.5x.

    python experiments/bench/recurrent_atari.py [--seconds 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlfw.envs import EnvSpaces
from rlfw.launch.build import build_agent, build_algo, build_sampler
from rlfw.launch.config import RunConfig
from rlfw.samplers.machinery.throughput import measure_steps_per_second

ENV = "ALE/Pong-v5"


def config_for(recurrent: str | None, sampler: str = "serial") -> RunConfig:
    workers = {} if sampler == "serial" else {"n_workers": 2}  # serial has none to set
    return RunConfig.for_env(ENV, algo="ppo", sampler=sampler, recurrent=recurrent, **workers)


def sampling_rate(recurrent: str | None, sampler: str, seconds: float) -> float:
    config = config_for(recurrent, sampler)
    factory = config.env_factory()
    torch.manual_seed(0)
    agent = build_agent(config, EnvSpaces.of(factory))
    return measure_steps_per_second(build_sampler(config, factory), agent, seconds)


def update_seconds(recurrent: str | None, repeats: int) -> float:
    """Median time of ``PPO.optimize`` on one sampled ``[128, 8]`` batch."""
    config = config_for(recurrent)
    factory = config.env_factory()
    torch.manual_seed(0)
    agent = build_agent(config, EnvSpaces.of(factory))
    with build_sampler(config, factory) as sampler:
        sampler.initialize(agent)
        samples, _ = sampler.obtain_samples(0)
    algo = build_algo(config, EnvSpaces.of(factory))
    algo.initialize(agent, n_itr=1000)
    algo.optimize(samples, 0)  # warm-up (allocator, kernels)
    times = []
    for itr in range(repeats):
        start = time.perf_counter()
        algo.optimize(samples, itr + 1)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'row':34s} {'feed-forward':>13s} {'lstm':>10s} {'ratio':>7s}  goal")
    for sampler in ("cpu", "native"):
        ff = statistics.median(
            sampling_rate(None, sampler, args.seconds) for _ in range(args.repeats)
        )
        lstm = statistics.median(
            sampling_rate("lstm", sampler, args.seconds) for _ in range(args.repeats)
        )
        print(
            f"{'sampling steps/s, ' + sampler:34s} {ff:13.0f} {lstm:10.0f} {lstm / ff:7.2f}  >= 0.8"
        )
    ff, lstm = update_seconds(None, args.repeats), update_seconds("lstm", args.repeats)
    print(f"{'PPO update on [128, 8], s':34s} {ff:13.2f} {lstm:10.2f} {lstm / ff:7.2f}  <= 1.5")


if __name__ == "__main__":
    main()
