"""DQN on CartPole or an Atari game, read top to bottom. It builds exactly the run
``python -m rlfw train --algo dqn`` builds from the same flags (same config.json, same bits).

    python experiments/dqn.py --env CartPole-v1 --steps 60000
    python experiments/dqn.py --env ALE/Breakout-v5 --sampler native --steps 10000000
"""
import argparse

from rlfw import RunConfig, build_runner
from rlfw.launch.build import default_log_dir


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--steps", type=int, help="env steps (default: the preset's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sampler", help="serial, cpu, gpu, alternating, native, queue")
    parser.add_argument("--log-dir", help="run folder (default: runs/dqn-<env>-s<seed>-<time>)")
    args = parser.parse_args()

    # The tuned preset (rl-baselines3-zoo CartPole with 3-step double-Q targets; zoo Atari),
    # then this run's own choices; double-Q, dueling etc. are fields of config.dqn.
    config = RunConfig.for_env(args.env, algo="dqn", steps=args.steps, seed=args.seed)
    if args.sampler:
        config.sampler = args.sampler  # the one line to swap: "serial" -> "cpu", "native"...
    log_dir = args.log_dir or default_log_dir(config)

    with build_runner(config, log_dir) as runner:  # `with` stops the sampler's workers after
        result = runner.train()
    print(f"{result.evals()}; run folder {log_dir}")


if __name__ == "__main__":  # worker processes re-import this file under spawn
    main()
