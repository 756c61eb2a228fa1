"""PPO or A2C on any gymnasium id or Atari game, read top to bottom.

    python experiments/pg.py --algo ppo --env CartPole-v1 --steps 120000
    python experiments/pg.py --algo a2c --env ALE/Pong-v5 --steps 10000000
"""
import argparse

import time

from rlfw import (A2C, PPO, ActorCriticAgent, EnvFactory, EnvSpaces, ParallelCpuSampler,
                  RunSchedule, SerialSampler, SyncRunner, seed_everything)
from rlfw.launch.config import RunConfig, apply_overrides, preset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--algo", choices=("ppo", "a2c"), default="ppo")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--steps", type=int, default=120_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    # Tuned hyper-parameters for the env family (zoo CartPole; PPO / A3C papers for Atari).
    config = apply_overrides(RunConfig(algo=args.algo, env=args.env, seed=args.seed),
                             preset(args.algo, args.env))
    seed_everything(args.seed)

    env = EnvFactory(args.env)                         # Nature preprocessing for ALE/ ids
    agent = ActorCriticAgent.build(EnvSpaces.of(env))  # MLP, or Nature CNN for frames
    sampler = SerialSampler(env, config.batch_T, config.batch_B, seed=args.seed)  # swap, e.g.
    # sampler = ParallelCpuSampler(env, config.batch_T, config.batch_B, seed=args.seed, n_workers=2)
    algo = PPO(config.ppo) if args.algo == "ppo" else A2C(config.a2c)
    schedule = RunSchedule(n_steps=args.steps, eval_every=max(args.steps // 10, 1),
                           log_every=max(args.steps // 20, 1))
    log_dir = time.strftime(f"runs/experiment-{args.algo}-{args.env.replace('/', '_')}"
                            f"-s{args.seed}-%Y%m%d-%H%M%S")
    with SyncRunner(algo, agent, sampler, schedule, log_dir=log_dir, seed=args.seed,
                    config=config.to_dict()) as runner:
        result = runner.train()
    print(f"final eval {result.eval_return:.1f} (best {result.best_eval_return:.1f}); {log_dir}")


if __name__ == "__main__":  # worker processes re-import this file under spawn
    main()
