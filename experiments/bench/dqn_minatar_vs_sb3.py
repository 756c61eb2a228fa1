"""rlfw DQN vs stable-baselines3 DQN on MinAtar, the `minatar` suite's settings (rlfw's
preset and network for both, `rlfw.bench.same_settings`), timed side by side in one run.

Each framework trains for ``--steps`` env steps (the preset's first 5,000 fill the replay,
then one update of 32 per env step), runs alternating rlfw, SB3, rlfw, SB3, ... in this one
process with one torch thread; prints each run's training seconds, env steps/s and the
ratio of medians. Run it on a quiet machine.

    python experiments/bench/dqn_minatar_vs_sb3.py [--env ENV] [--steps 30000] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

import torch

from rlfw.bench.clock import RunClock
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig


def rlfw_seconds(env: str, steps: int, seed: int) -> tuple[float, float | None]:
    config = RunConfig.for_env(env, "dqn", steps, seed=seed)
    config.schedule.eval_every = None
    with tempfile.TemporaryDirectory() as run_dir:
        with build_runner(config, run_dir, progress=False, stdout=False) as runner:
            with RunClock() as clock:
                runner.train()
    return clock.wall_s, clock.wait_share


def sb3_seconds(env: str, steps: int, seed: int) -> tuple[float, float | None]:
    from stable_baselines3.common.env_util import make_vec_env

    from rlfw.bench.same_settings import sb3_model

    config = RunConfig.for_env(env, "dqn", steps, seed=seed)
    factory = config.env_factory()
    envs = make_vec_env(lambda: factory(True), n_envs=config.batch_B, seed=seed)
    model = sb3_model(config, envs, seed)
    with RunClock() as clock:
        model.learn(total_timesteps=steps)
    envs.close()
    return clock.wall_s, clock.wait_share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="MinAtar/Breakout-v1")
    parser.add_argument("--steps", type=int, default=30_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    times: dict[str, list[float]] = {"rlfw": [], "sb3": []}
    for repeat in range(args.repeats):
        for name, run in (("rlfw", rlfw_seconds), ("sb3", sb3_seconds)):
            seconds, wait = run(args.env, args.steps, seed=repeat)
            times[name].append(seconds)
            print(
                f"{name:>4} seed {repeat}: {seconds:6.1f} s, {args.steps / seconds:6.0f} "
                f"env steps/s, run-queue wait {wait if wait is None else f'{wait:.1%}'}",
                flush=True,
            )
    ours, peer = statistics.median(times["rlfw"]), statistics.median(times["sb3"])
    print(
        f"{args.env}, DQN, {args.steps:,} env steps: rlfw {ours:.1f} s, SB3 {peer:.1f} s, "
        f"rlfw / SB3 = {ours / peer:.2f}x"
    )


if __name__ == "__main__":
    main()
