"""Where the MinAtar suite's seconds go: the games' own stepping against each framework's run.

The suite's time goal is rlfw <= 0.5x SB3's seconds. A run cannot take less than its env
steps cost with no framework at all, so this measures that floor, in one run, on one core
and one torch thread (as the suite's jobs run):

- bare: the preset's 16 gymnasium envs (``MinAtar/<Game>-v1`` as rlfw builds them, uint8
  [C, 10, 10]) stepped in a plain loop with random actions; no framework, no network;
- sampler: rlfw's serial sampler filling its [T, B] batches with a uniform-random agent;
- acting: the same sampler with the preset's PPO agent (network inference per step);
- training: a whole PPO run of the preset (sampling and learning, no evaluation) for
  ``--train-steps``, extrapolated to the suite's budget; learning = training - acting.

For each game it prints these rates, the seconds of the suite's 2M PPO steps at each, and
those seconds over SB3's mean wall time in the committed suite records: "floor/SB3" is the
lowest rlfw / SB3 time ratio any framework could reach on the game alone, "acting/SB3" with
the network's inference too, "train/SB3" what rlfw's run takes here, now.

    python experiments/bench/minatar_time_split.py [--seconds 10] [--games Breakout ...]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import time

import numpy as np
import torch

from rlfw.agents.random_agent import RandomAgent
from rlfw.bench.suites import MINATAR_BUDGET
from rlfw.envs import EnvSpaces
from rlfw.launch.build import build_agent, build_runner, build_sampler
from rlfw.launch.config import RunConfig
from rlfw.samplers.machinery.throughput import bare_env_rate, measure_steps_per_second

GAMES = ("Breakout", "SpaceInvaders", "Asterix", "Freeway")
RECORDS = os.path.join("docs", "benchmarks", "minatar", "records")


def sampler_rate(config: RunConfig, seconds: float, acting: bool) -> float:
    factory = config.env_factory()
    spaces = EnvSpaces.of(factory)
    agent = build_agent(config, spaces) if acting else RandomAgent(spaces.action)
    return measure_steps_per_second(build_sampler(config, factory), agent, seconds)


def training_rate(config: RunConfig, steps: int) -> float:
    """Env steps/s of a whole run of the preset (no evaluation, no run folder)."""
    config.schedule.n_steps, config.schedule.eval_every = steps, None
    with build_runner(config, None, progress=False, stdout=False) as runner:
        start = time.perf_counter()
        result = runner.train()
    return result.env_steps / (time.perf_counter() - start)


def mean_wall(framework: str, game: str) -> float | None:
    walls = [
        json.load(open(p)).get("wall_s")
        for p in glob.glob(os.path.join(RECORDS, f"ppo-MinAtar_{game}-v1", f"{framework}-*.json"))
    ]
    walls = [w for w in walls if w]
    return float(np.mean(walls)) if walls else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--games", nargs="+", default=list(GAMES), choices=GAMES)
    parser.add_argument("--train-steps", type=int, default=100_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    steps = MINATAR_BUDGET["ppo"]
    print(
        f"PPO preset, {steps:,} env steps per run; rates in env steps/s; seconds for the "
        f"run at that rate; rlfw s / SB3 s: the committed records' mean wall time"
    )
    print(
        f"{'game':<14} {'bare':>8} {'sampler':>8} {'acting':>8} {'training':>8}   "
        f"{'floor s':>7} {'acting s':>8} {'learn s':>7} {'train s':>7}   {'rlfw s':>6} "
        f"{'SB3 s':>6}   {'floor/SB3':>9} {'acting/SB3':>10} {'train/SB3':>9}"
    )
    for game in args.games:
        config = RunConfig.for_env(f"MinAtar/{game}-v1", "ppo", sampler="serial")
        bare = bare_env_rate(config.env_factory(), config.batch_B, args.seconds)
        sampler = sampler_rate(config, args.seconds, acting=False)
        acting = sampler_rate(config, args.seconds, acting=True)
        training = training_rate(config, args.train_steps)
        floor_s, acting_s, train_s = steps / bare, steps / acting, steps / training
        ours, theirs = mean_wall("rlfw", game), mean_wall("sb3", game)

        def share(x: float, of: float | None) -> str:
            return f"{x / of:.2f}" if of else "–"

        print(
            f"{game:<14} {bare:>8,.0f} {sampler:>8,.0f} {acting:>8,.0f} {training:>8,.0f}   "
            f"{floor_s:>7.0f} {acting_s:>8.0f} {train_s - acting_s:>7.0f} {train_s:>7.0f}   "
            f"{ours or 0:>6.0f} {theirs or 0:>6.0f}   {share(floor_s, theirs):>9} "
            f"{share(acting_s, theirs):>10} {share(train_s, theirs):>9}",
            flush=True,
        )


if __name__ == "__main__":
    main()
