"""One gradient step of the Q-learning family on the same network and minibatch size, in one
run, interleaved: DQN, C51 (51 atoms), and R2D1 per learned transition (its sequences of
burn-in + learned steps + n). Median seconds per step, each as a ratio to DQN's.

    python experiments/bench/qlearning_step.py [--env MinAtar/Breakout-v1] [--repeats 5]

The issue's goal: a C51 step at most 1.3x DQN's.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlfw.launch.build import build_agent, build_algo
from rlfw.launch.config import RunConfig
from rlfw.samplers.serial import SerialSampler


def learner(algo: str, env: str, steps: int):
    """An algorithm bound to its agent, its replay filled with ``steps`` sampled steps."""
    torch.manual_seed(0)
    config = RunConfig.for_env(env, algo)
    own = config.algo_config()
    own.learning_starts = 0
    factory = config.env_factory()
    from rlfw.envs import EnvSpaces

    spaces = EnvSpaces.of(factory)
    agent = build_agent(config, spaces)
    algorithm = build_algo(config, spaces)
    algorithm.initialize(agent, n_itr=1_000)
    with SerialSampler(factory, config.batch_T, config.batch_B, seed=0) as sampler:
        sampler.initialize(agent)
        for itr in range(-(-steps // (config.batch_T * config.batch_B))):
            samples, _ = sampler.obtain_samples(itr)
            if algorithm.replay is None:
                algorithm.make_replay(samples)
            algorithm.replay.append_samples(samples)
    agent.train_mode()
    return algorithm, own


def seconds_per_step(algorithm, own, repeats: int, steps: int = 50) -> float:
    stats = {"loss": [], "q": [], "grad_norm": [], "td_abs": []}
    times = []
    for _ in range(repeats):
        batches = [algorithm.replay.sample(own.batch_size) for _ in range(steps)]
        start = time.perf_counter()
        for batch in batches:
            algorithm._learn(batch, stats)
        times.append((time.perf_counter() - start) / steps)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", default="MinAtar/Breakout-v1")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    learners = {name: learner(name, args.env, 6_000) for name in ("dqn", "c51")}
    learners["r2d1"] = learner("r2d1", args.env, 20_000)
    for _, own in learners.values():
        own.compile = False
    results = {name: [] for name in learners}
    for _ in range(args.repeats):  # interleaved: the machine's drift hits all alike
        for name, (algorithm, own) in learners.items():
            results[name].append(seconds_per_step(algorithm, own, 1))
    dqn = statistics.median(results["dqn"])
    print(f"{args.env}, one torch thread, median of {args.repeats} x 50 steps")
    for name, times in results.items():
        own = learners[name][1]
        per = statistics.median(times)
        learned = own.batch_size * getattr(own, "learn_steps", 1)
        print(
            f"{name:>5}: {per * 1e3:7.2f} ms per gradient step ({per / dqn:.2f}x dqn), "
            f"{learned} learned transitions, {per / learned * 1e6:7.1f} µs per "
            f"transition ({per / learned / (dqn / learners['dqn'][1].batch_size):.2f}x "
            "dqn's)"
        )


if __name__ == "__main__":
    main()
