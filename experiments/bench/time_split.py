"""Where each framework's seconds go in one PPO run: collecting against learning, beside
the envs' own stepping.

A time ratio against a peer says how much faster a run is, not what is left to win. This
trains rlfw and SB3 once each on the same settings, one torch thread, with timers around
the two phases of every iteration (rlfw: the sampler's ``obtain_samples`` and the
algorithm's ``optimize``; SB3: ``collect_rollouts`` and ``train``), then steps the same
envs bare (random actions, no framework, no network) for the run's steps. Per phase it
prints both frameworks' seconds and their ratio; "acting" is collecting less the bare env
steps (the network's inference and the framework's bookkeeping per step). The last line is
the ratio rlfw's run would have if one of its phases cost nothing more (collecting no
more than the bare env steps; learning nothing at all), which bounds what work on that
phase alone can buy.

Setups: ``cartpole``, PPO on CartPole-v1 with SB3's defaults on both sides (as
``cartpole_vs_sb3.py``: 8 envs x 2048 steps, 10 epochs of minibatch 64); or a benchmark
entry whose peer runs rlfw's settings and network, named ``SUITE:ENTRY``
(``spaces:ppo-MiniGrid-DoorKey-5x5-v0``).

    python experiments/bench/time_split.py [--setup cartpole] [--steps N] [--seed 0]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any, Callable

import numpy as np
import torch

from rlfw.bench.job import sb3_same_model
from rlfw.bench.run import Job, job_config
from rlfw.bench.suites import SUITES
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig
from rlfw.runners import RunSchedule
from rlfw.samplers.machinery.throughput import bare_env_rate

CARTPOLE_STEPS = 114_688


def timed(fn: Callable, totals: dict[str, float], phase: str) -> Callable:
    """``fn`` with its seconds added to ``totals[phase]`` at each call."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[phase] += time.perf_counter() - start

    return wrapper


def setup(name: str, steps: int | None, seed: int) -> tuple[RunConfig, Callable[[], Any], int]:
    """(rlfw's config, a builder of SB3's model on the same settings, the run's steps)."""
    if name == "cartpole":
        config = RunConfig(algo="ppo", env="CartPole-v1", seed=seed, batch_B=8, batch_T=2048)
        config.ppo.optimizer_eps = 1e-5  # SB3 sets Adam's eps to 1e-5
        n_steps = steps or CARTPOLE_STEPS

        def sb3() -> Any:
            from stable_baselines3 import PPO
            from stable_baselines3.common.env_util import make_vec_env

            return PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=seed), seed=seed)

        return config, sb3, n_steps
    suite_name, _, entry_name = name.partition(":")
    if suite_name not in SUITES:
        raise SystemExit(
            f"--setup {name!r}: use 'cartpole' or SUITE:ENTRY, SUITE in {sorted(SUITES)}"
        )
    suite = SUITES[suite_name]
    entries = {entry.name: entry for entry in suite.entries}
    if entry_name not in entries or suite.peer_settings != "same":
        raise SystemExit(
            f"--setup {name!r}: the entry must be one of {sorted(entries)} in a suite whose "
            f"peer runs rlfw's settings (suite {suite_name!r}: peer {suite.peer_settings!r})"
        )
    entry = entries[entry_name]
    job = Job("rlfw", entry.algo, entry.env, steps or entry.budget, seed, peer_settings="same")
    return job_config(job), lambda: sb3_same_model(job)[0], job.steps


def rlfw_split(config: RunConfig, steps: int) -> dict[str, float]:
    config.schedule = RunSchedule(
        n_steps=steps, eval_every=None, log_every=10 * steps, checkpoint_every=10 * steps
    )
    totals = {"collect": 0.0, "learn": 0.0}
    # as the benchmark's job does: the first optimizer's torch._dynamo import (about 1 s)
    # is paid before the clock, as SB3 pays it building its model
    import torch._dynamo  # noqa: F401

    with tempfile.TemporaryDirectory() as run_dir:
        with build_runner(config, run_dir, progress=False, stdout=False) as runner:
            sampler, algo = runner.sampler, runner.algo
            # the instances' methods wrapped (setattr: patching one object, not its class)
            setattr(sampler, "obtain_samples", timed(sampler.obtain_samples, totals, "collect"))
            setattr(algo, "optimize", timed(algo.optimize, totals, "learn"))
            start = time.perf_counter()
            runner.train()
            totals["total"] = time.perf_counter() - start
    return totals


def sb3_split(build: Callable[[], Any], steps: int) -> dict[str, float]:
    model = build()
    totals = {"collect": 0.0, "learn": 0.0}
    model.collect_rollouts = timed(model.collect_rollouts, totals, "collect")
    model.train = timed(model.train, totals, "learn")
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    totals["total"] = time.perf_counter() - start
    model.get_env().close()
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", default="cartpole", help="cartpole, or SUITE:ENTRY")
    parser.add_argument("--steps", type=int, default=None, help="default: the setup's")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    config, build_sb3, steps = setup(args.setup, args.steps, args.seed)
    ours = rlfw_split(config, steps)
    peer = sb3_split(build_sb3, steps)
    bare = steps / bare_env_rate(config.env_factory(), config.batch_B, 5.0)
    for split in (ours, peer):
        split["acting"] = split["collect"] - bare
        split["other"] = split["total"] - split["collect"] - split["learn"]
    print(f"## {args.setup}: {steps} env steps, seed {args.seed}, one torch thread")
    print(f"bare env steps (random actions, no framework): {bare:.1f} s\n")
    print("| phase | rlfw s | SB3 s | rlfw / SB3 |")
    print("|---|---:|---:|---:|")
    for phase in ("total", "collect", "acting", "learn", "other"):
        ratio = ours[phase] / peer[phase] if peer[phase] > 0 else float("nan")
        print(f"| {phase} | {ours[phase]:.1f} | {peer[phase]:.1f} | {ratio:.2f}x |")
    free_collect = (ours["total"] - ours["acting"]) / peer["total"]
    free_learn = (ours["total"] - ours["learn"]) / peer["total"]
    print(
        f"\nrlfw / SB3 if rlfw's acting cost nothing: {free_collect:.2f}x; "
        f"if its learning cost nothing: {free_learn:.2f}x"
    )
    print(f"(np {np.__version__}, torch {torch.__version__})")


if __name__ == "__main__":
    main()
