"""Any registered algorithm (PPO, A2C, DQN, or your own) on any gymnasium id or Atari game,
read top to bottom. It builds exactly the run ``python -m rlfw train`` builds from the same
flags (same config.json, same bits).

    python experiments/train.py --algo ppo --env CartPole-v1 --steps 120000
    python experiments/train.py --algo a2c --env ALE/Pong-v5 --sampler cpu --steps 10000000
    python experiments/train.py --algo dqn --env ALE/Breakout-v5 --sampler native
    python experiments/train.py --env Pendulum-v1 --steps 20000 --seed 1 --log-dir runs/pend
"""

import argparse

from rlfw import RunConfig, build_runner
from rlfw.launch.build import default_log_dir
from rlfw.registry import ALGOS, SAMPLERS


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--algo", choices=ALGOS.names(), default="ppo")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--steps", type=int, help="env steps (default: the preset's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sampler", choices=SAMPLERS.names(), help="default serial")
    parser.add_argument("--log-dir", help="run folder (default: runs/<algo>-<env>-s<seed>-<time>)")
    args = parser.parse_args()

    # The tuned preset for the algorithm and env family (zoo CartPole, normalized Pendulum /
    # MuJoCo, the PPO, A3C and DQN settings for Atari), then this run's own choices;
    # double-Q, dueling etc. are fields of config.dqn, epochs of config.ppo.
    config = RunConfig.for_env(args.env, algo=args.algo, steps=args.steps, seed=args.seed)
    if args.sampler:
        config.sampler = args.sampler  # the one line to swap: "serial" -> "cpu", "native"...
    log_dir = args.log_dir or default_log_dir(config)

    with build_runner(config, log_dir) as runner:  # `with` stops the sampler's workers after
        result = runner.train()
    print(f"{result.evals()}; run folder {log_dir}")


if __name__ == "__main__":  # worker processes re-import this file under spawn
    main()
