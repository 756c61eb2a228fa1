"""Sampler throughput on Pong, rlfw vs peers, in one run (medians of repeats, as ratios).

Rows: rlfw serial, parallel-CPU, parallel-GPU, alternating and native samplers (and the
native one with its games in a single group) with a uniform-random agent; gymnasium
AsyncVectorEnv (shared memory) and SB3 SubprocVecEnv stepping the same preprocessed envs
with random actions; the ceiling of a process sampler (N_WORKERS bare processes stepping
their share of the envs, no framework, no synchronisation); a bare ale-py AtariVectorEnv
loop (the native sampler's peer).
Then PPO-Pong training steps/s with each rlfw sampler.

    python experiments/bench/sampler_throughput.py [--seconds 8] [--repeats 3] [--no-ppo]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import time

import numpy as np

from rlfw.agents.random_agent import RandomAgent
from rlfw.envs import EnvFactory, EnvSpaces
from rlfw.launch.build import build_runner, build_sampler
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.runners import RunSchedule
from rlfw.samplers.machinery.throughput import measure_steps_per_second, step_envs_bare
from rlfw.samplers.native_atari import rom_name

ENV, N_ENVS, N_WORKERS, BATCH_T = "ALE/Pong-v5", 8, 2, 64
SAMPLERS = ("serial", "cpu", "gpu", "alternating", "native")


def rlfw_rate(sampler: str, seconds: float) -> float:
    config = RunConfig(
        env=ENV, sampler=sampler, batch_B=N_ENVS, batch_T=BATCH_T, n_workers=N_WORKERS
    )
    factory = config.env_factory()
    agent = RandomAgent(EnvSpaces.of(factory).action)
    return measure_steps_per_second(build_sampler(config, factory), agent, seconds)


def native_one_group_rate(seconds: float) -> float:
    """The native sampler with all games in one ``AtariVectorEnv`` (its default is two
    groups, one stepping while the other's actions are chosen): what the groups add."""
    from rlfw.samplers import NativeAtariSampler

    factory = EnvFactory(ENV)
    sampler = NativeAtariSampler(factory, BATCH_T, N_ENVS, n_threads=N_WORKERS, n_groups=1)
    return measure_steps_per_second(sampler, RandomAgent(EnvSpaces.of(factory).action), seconds)


def _vector_rate(envs, n_actions: int, seconds: float) -> float:
    rng = np.random.default_rng(0)
    envs.reset()  # gymnasium and SB3 vector envs alike
    for _ in range(BATCH_T):  # warm-up
        envs.step(rng.integers(n_actions, size=N_ENVS))
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        envs.step(rng.integers(n_actions, size=N_ENVS))
        steps += N_ENVS
    rate = steps / (time.perf_counter() - start)
    envs.close()
    return rate


def async_vector_rate(seconds: float) -> float:
    import gymnasium as gym

    factory = EnvFactory(ENV)
    envs = gym.vector.AsyncVectorEnv([lambda: factory(True)] * N_ENVS, shared_memory=True)
    return _vector_rate(envs, int(envs.single_action_space.n), seconds)


def subproc_vec_rate(seconds: float) -> float:
    from stable_baselines3.common.vec_env import SubprocVecEnv

    factory = EnvFactory(ENV)
    envs = SubprocVecEnv([lambda: factory(True)] * N_ENVS)
    return _vector_rate(envs, int(envs.action_space.n), seconds)


def _bare_process(n_envs: int, seconds: float, seed: int) -> int:
    """Steps ``n_envs`` preprocessed envs with random actions for ``seconds``; env steps."""
    factory = EnvFactory(ENV)
    envs = [factory(True) for _ in range(n_envs)]
    for i, env in enumerate(envs):
        env.reset(seed=seed + i)
    return step_envs_bare(envs, seconds, seed)


def bare_processes_rate(seconds: float) -> float:
    """The ceiling of a process-per-core sampler: N_WORKERS processes x N_ENVS/N_WORKERS
    envs stepping on their own, no framework, no synchronisation (startup excluded)."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(N_WORKERS) as pool:
        pool.starmap(_bare_process, [(1, 0.1, 0)] * N_WORKERS)  # warm: imports, ROM load
        counts = pool.starmap(
            _bare_process, [(N_ENVS // N_WORKERS, seconds, 100 * w) for w in range(N_WORKERS)]
        )
    return sum(counts) / seconds


def bare_native_rate(seconds: float) -> float:
    from ale_py.vector_env import AtariVectorEnv

    envs = AtariVectorEnv(rom_name(ENV), N_ENVS, num_threads=N_WORKERS, batch_size=N_ENVS)
    return _vector_rate(envs, int(envs.single_action_space.n), seconds)


def ppo_rate(sampler: str, steps: int) -> float:
    config = apply_overrides(
        RunConfig(algo="ppo", env=ENV, sampler=sampler, n_workers=N_WORKERS), preset("ppo", ENV)
    )
    config.schedule = RunSchedule(
        n_steps=steps, log_every=10 * steps, checkpoint_every=10 * steps, eval_every=None
    )
    start = time.perf_counter()
    with build_runner(config, None, progress=False, stdout=False) as runner:
        runner.train()
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-ppo", action="store_true")
    parser.add_argument("--ppo-steps", type=int, default=8 * 128 * 6)
    args = parser.parse_args()
    rows = {f"rlfw {s}": (lambda s=s: rlfw_rate(s, args.seconds)) for s in SAMPLERS}
    rows["rlfw native, 1 group"] = lambda: native_one_group_rate(args.seconds)
    rows.update(
        {
            "gymnasium AsyncVectorEnv": lambda: async_vector_rate(args.seconds),
            "SB3 SubprocVecEnv": lambda: subproc_vec_rate(args.seconds),
            f"bare {N_WORKERS} processes": lambda: bare_processes_rate(args.seconds),
            "bare AtariVectorEnv": lambda: bare_native_rate(args.seconds),
        }
    )
    rates: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.repeats):  # interleaved, so machine noise hits every row alike
        for name, run in rows.items():
            rates[name].append(run())
    med = {name: statistics.median(v) for name, v in rates.items()}
    ref = med["gymnasium AsyncVectorEnv"]
    print(
        f"\nPong, {N_ENVS} envs, {N_WORKERS} workers, random agent, median of "
        f"{args.repeats} x {args.seconds:.0f} s"
    )
    print(f"{'':<26} {'steps/s':>9} {'vs Async':>9} {'vs bare native':>15}")
    for name, rate in med.items():
        bare = med["bare AtariVectorEnv"]
        print(f"{name:<26} {rate:>9,.0f} {rate / ref:>8.2f}x {rate / bare:>14.2f}x")
    if not args.no_ppo:
        print(f"\nPPO on Pong, {args.ppo_steps} steps (Nature CNN on CPU), training steps/s:")
        for sampler in SAMPLERS:
            print(f"  {sampler:<12} {ppo_rate(sampler, args.ppo_steps):>8,.0f}")


if __name__ == "__main__":
    main()
