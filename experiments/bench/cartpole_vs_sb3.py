"""rlfw vs stable-baselines3 on CartPole-v1, same hyper-parameters, same run.

PPO with SB3's defaults (8 envs x 2048 steps, minibatch 64, 10 epochs, 114,688 steps) and
A2C with SB3's defaults (8 envs x 5 steps, RMSprop, 100,000 steps). Prints wall-clock,
env steps/s, final greedy eval return (10 episodes) and the time ratio rlfw / SB3.

rlfw's time includes the runner's final 10-episode evaluation; SB3's covers ``learn()`` only.

    python experiments/bench/cartpole_vs_sb3.py [--seed 0] [--only ppo|a2c] [--compile on]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from rlfw.algos.compile import COMPILE_MODES
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig
from rlfw.runners import RunSchedule

PPO_STEPS, A2C_STEPS = 114_688, 100_000


def rlfw_run(algo: str, steps: int, seed: int, compile: bool | None = None) -> tuple[float, float]:
    config = RunConfig(
        algo=algo, env="CartPole-v1", seed=seed, batch_B=8, batch_T=2048 if algo == "ppo" else 5
    )
    config.algo_config().compile = compile
    config.ppo.optimizer_eps = 1e-5  # SB3 sets Adam's eps to 1e-5
    config.schedule = RunSchedule(
        n_steps=steps,
        eval_every=10 * steps,
        eval_episodes=10,
        log_every=10 * steps,
        checkpoint_every=10 * steps,
    )
    start = time.perf_counter()
    with build_runner(config, None, progress=False, stdout=False) as runner:
        result = runner.train()
    return time.perf_counter() - start, result.eval_return


def sb3_run(algo: str, steps: int, seed: int) -> tuple[float, float]:
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = (PPO if algo == "ppo" else A2C)("MlpPolicy", env, seed=seed, verbose=0)
    start = time.perf_counter()
    model.learn(steps)
    seconds = time.perf_counter() - start
    mean, _ = evaluate_policy(
        model,
        make_vec_env("CartPole-v1", n_envs=1, seed=seed + 100),
        n_eval_episodes=10,
        deterministic=True,
    )
    return seconds, float(mean)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=("ppo", "a2c"))
    parser.add_argument(
        "--compile",
        choices=tuple(COMPILE_MODES),
        default="auto",
        help="rlfw's --compile (auto: off at these run lengths)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)  # both frameworks alike; tiny MLPs gain nothing from threads
    # Warm-up: one-time imports (torch's optimizer machinery, SB3) stay out of both timings,
    # and with --compile the kernels are built here and the timed runs load them from the
    # disk cache, as every run after a configuration's first does (the first run's compile
    # time is printed on its own).
    compile_mode = COMPILE_MODES[args.compile]
    for algo in ("ppo", "a2c"):
        if args.only and algo != args.only:
            continue
        warm_up, _ = rlfw_run(algo, 16 * 8, args.seed, compile_mode)
        sb3_run(algo, 16 * 8, args.seed)
        if compile_mode:
            print(f"{algo} warm-up run with compile (builds or loads the kernels): {warm_up:.1f} s")
    rows = []
    for algo, steps in (("ppo", PPO_STEPS), ("a2c", A2C_STEPS)):
        if args.only and algo != args.only:
            continue
        ours = rlfw_run(algo, steps, args.seed, compile_mode)
        peer = sb3_run(algo, steps, args.seed)
        rows.append((algo, steps, ours, peer))
    print(
        f"\n{'algo':<5} {'steps':>8} | {'rlfw s':>7} {'steps/s':>8} {'eval':>6} | "
        f"{'sb3 s':>7} {'steps/s':>8} {'eval':>6} | {'time ratio rlfw/sb3':>19}"
    )
    for algo, steps, (t_ours, e_ours), (t_peer, e_peer) in rows:
        print(
            f"{algo:<5} {steps:>8} | {t_ours:>7.1f} {steps / t_ours:>8.0f} {e_ours:>6.1f} | "
            f"{t_peer:>7.1f} {steps / t_peer:>8.0f} {e_peer:>6.1f} | "
            f"{t_ours / t_peer:>19.2f}"
        )


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
