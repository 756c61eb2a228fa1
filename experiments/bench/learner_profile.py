"""Where a learner update's time goes: torch.profiler tables for PPO, A2C and DQN updates
on CartPole-v1 with the settings of the SB3 comparison (``cartpole_vs_sb3.py``,
``dqn_cartpole_vs_sb3.py``), one torch thread.

Per algorithm: wall-clock per update (median of repeats), the share of it spent inside
torch ops (the rest is Python: the framework's and the algorithm's own), then the top ops
by self CPU time (op, calls, total, per call).

    python experiments/bench/learner_profile.py [--algos ppo a2c dqn] [--rows 12] [--compile]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

from rlfw.envs import EnvSpaces
from rlfw.launch.build import build_agent, build_algo, build_sampler
from rlfw.launch.config import RunConfig, apply_overrides, preset


def setup(algo: str, compile: bool = False):
    """(one update as a callable, what one update is) for ``algo``, eager or compiled."""
    if algo == "dqn":
        config = apply_overrides(RunConfig(algo="dqn"), preset("dqn", "CartPole-v1"))
        apply_overrides(config, {"dqn": dict(double_dqn=False, n_step=1, anneal_lr=False)})
    else:
        config = RunConfig(algo=algo, batch_B=8, batch_T=2048 if algo == "ppo" else 5)
        config.ppo.optimizer_eps = 1e-5
    config.algo_config().compile = compile
    factory = config.env_factory()
    spaces = EnvSpaces.of(factory)
    agent = build_agent(config, spaces)
    learner = build_algo(config, spaces)
    sampler = build_sampler(config, factory)
    samples = sampler.initialize(agent)
    n_itr = 1000
    learner.initialize(agent, n_itr)
    if algo == "dqn":
        c = learner.config
        per_batch = config.batch_B * config.batch_T
        for itr in range(-(-c.learning_starts // per_batch)):  # fill past learning_starts
            learner.replay is None and learner.make_replay(samples)
            learner.replay.append_samples(sampler.obtain_samples(itr)[0])
        sampler.close()
        batch_size = c.batch_size

        def update():
            stats = {"loss": [], "q": [], "grad_norm": [], "td_abs": []}
            learner._learn(learner.replay.sample(batch_size), stats)

        return update, f"one gradient step (batch {batch_size}, MLP {config.hidden})"
    sampler.obtain_samples(0)
    sampler.close()
    what = f"one batch {config.batch_T}x{config.batch_B}" + (
        f": {config.ppo.epochs} epochs x minibatch {config.ppo.minibatch_size}"
        if algo == "ppo"
        else ": one gradient step"
    )
    return (lambda: learner.optimize(samples, 1)), what


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--algos", nargs="+", default=["ppo", "a2c", "dqn"], choices=("ppo", "a2c", "dqn")
    )
    parser.add_argument("--rows", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=3.0, help="timing per algorithm")
    parser.add_argument("--compile", action="store_true", help="profile the compiled losses")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for algo in args.algos:
        torch.manual_seed(0)
        update, what = setup(algo, args.compile)
        update()  # warm-up
        times = []
        start = time.perf_counter()
        while time.perf_counter() - start < args.seconds or len(times) < 3:
            t0 = time.perf_counter()
            update()
            times.append(time.perf_counter() - t0)
        per_update = statistics.median(times)
        n_profiled = max(1, int(1.0 / per_update))
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(n_profiled):
                update()
        events = prof.key_averages()
        in_ops = sum(e.self_cpu_time_total for e in events) / 1e6 / n_profiled
        print(f"\n## {algo.upper()} CartPole — {what}, {'compiled' if args.compile else 'eager'}")
        print(
            f"wall per update {per_update * 1e3:.3f} ms (median of {len(times)}); inside "
            f"torch ops {in_ops * 1e3:.3f} ms under the profiler ({n_profiled} updates "
            f"profiled); ops' self time per update:"
        )
        rows = sorted(events, key=lambda e: -e.self_cpu_time_total)[: args.rows]
        print(f"| {'op':<34} | {'calls/update':>12} | {'ms/update':>9} | {'us/call':>8} |")
        print(f"|{'-' * 36}|{'-' * 14}|{'-' * 11}|{'-' * 10}|")
        for e in rows:
            ms = e.self_cpu_time_total / 1e3 / n_profiled
            print(
                f"| {e.key[:34]:<34} | {e.count / n_profiled:>12.1f} | {ms:>9.3f} | "
                f"{e.self_cpu_time_total / max(e.count, 1):>8.1f} |"
            )


if __name__ == "__main__":
    main()
