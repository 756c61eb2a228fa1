"""DQN on CartPole or an Atari game, read top to bottom; the sampler line is the one to swap.

    python experiments/dqn.py --env CartPole-v1 --steps 60000
    python experiments/dqn.py --env ALE/Breakout-v5 --steps 10000000 --double --dueling
"""
import argparse
import time

from rlfw import (DQN, DqnAgent, EnvFactory, EnvSpaces, ParallelCpuSampler, RunSchedule,
                  SerialSampler, SyncRunner, seed_everything)
from rlfw.launch.config import RunConfig, apply_overrides, preset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--steps", type=int, default=60_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--double", action="store_true")
    parser.add_argument("--dueling", action="store_true")
    args = parser.parse_args()

    # Tuned hyper-parameters for the env family (rl-baselines3-zoo CartPole / Atari).
    config = apply_overrides(RunConfig(algo="dqn", env=args.env, seed=args.seed),
                             preset("dqn", args.env))
    config.dqn.double_dqn = config.dqn.double_dqn or args.double
    config.dqn.dueling = args.dueling
    seed_everything(args.seed)

    env = EnvFactory(args.env)
    agent = DqnAgent.build(EnvSpaces.of(env), batch_B=config.batch_B, hidden=config.hidden,
                           dueling=args.dueling, eval_epsilon=config.dqn.eval_epsilon)
    sampler = SerialSampler(env, config.batch_T, config.batch_B, seed=args.seed)  # swap, e.g.
    # sampler = ParallelCpuSampler(env, config.batch_T, config.batch_B, seed=args.seed, n_workers=2)
    algo = DQN(config.dqn)
    schedule = RunSchedule(n_steps=args.steps, eval_every=max(args.steps // 10, 1),
                           log_every=max(args.steps // 20, 1))
    log_dir = time.strftime(f"runs/experiment-dqn-{args.env.replace('/', '_')}-s{args.seed}"
                            "-%Y%m%d-%H%M%S")
    with SyncRunner(algo, agent, sampler, schedule, log_dir=log_dir, seed=args.seed,
                    config=config.to_dict()) as runner:
        result = runner.train()
    print(f"final eval {result.eval_return:.1f} (best {result.best_eval_return:.1f}); {log_dir}")


if __name__ == "__main__":  # worker processes re-import this file under spawn
    main()
