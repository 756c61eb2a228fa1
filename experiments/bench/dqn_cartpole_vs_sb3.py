"""rlfw DQN vs stable-baselines3 DQN on CartPole-v1, zoo hyper-parameters, same run.

lr 2.3e-3, batch 64, replay 100k, learning starts 1000, gamma 0.99, target update every 10
env steps, train every 256 steps with 128 gradient steps, exploration fraction 0.16 to
epsilon 0.04, net 256-256, 50k steps, vanilla (not double) DQN as in SB3. Three seeds; prints
wall-clock of training, final greedy eval (10 episodes) and the time ratio rlfw / SB3.

    python experiments/bench/dqn_cartpole_vs_sb3.py [--seeds 0 1 2] [--steps 50000] [--compile on]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlfw.algos.compile import COMPILE_MODES
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.runners import RunSchedule


def rlfw_run(seed: int, steps: int, compile: bool | None = None) -> tuple[float, float]:
    config = apply_overrides(RunConfig(algo="dqn", seed=seed), preset("dqn", "CartPole-v1"))
    config.dqn.compile = compile
    # SB3's algorithm exactly: the preset's 3-step double-Q targets and LR annealing off.
    apply_overrides(config, {"dqn": dict(double_dqn=False, n_step=1, anneal_lr=False)})
    config.schedule = RunSchedule(
        n_steps=steps,
        eval_every=10 * steps,
        eval_episodes=10,
        log_every=10 * steps,
        checkpoint_every=10 * steps,
    )
    start = time.perf_counter()
    with build_runner(config, None, progress=False, stdout=False) as runner:
        result = runner.train()  # includes one final 10-episode evaluation
    return time.perf_counter() - start, result.eval_return


def sb3_run(seed: int, steps: int) -> tuple[float, float]:
    from stable_baselines3 import DQN
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    model = DQN(
        "MlpPolicy",
        make_vec_env("CartPole-v1", n_envs=1, seed=seed),
        seed=seed,
        learning_rate=2.3e-3,
        batch_size=64,
        buffer_size=100_000,
        learning_starts=1000,
        gamma=0.99,
        target_update_interval=10,
        train_freq=256,
        gradient_steps=128,
        exploration_fraction=0.16,
        exploration_final_eps=0.04,
        policy_kwargs=dict(net_arch=[256, 256]),
        verbose=0,
    )
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
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument(
        "--compile",
        choices=tuple(COMPILE_MODES),
        default="auto",
        help="rlfw's --compile (auto: off at this run length)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)  # both alike
    # Warm-up: one-time imports stay out of both timings, and with --compile the kernels are
    # built here and the timed runs load them from the disk cache, as every run after a
    # configuration's first does (the first run's compile time is printed on its own).
    compile_mode = COMPILE_MODES[args.compile]
    warm_up, _ = rlfw_run(0, 2000, compile_mode)
    sb3_run(0, 2000)
    if compile_mode:
        print(f"warm-up run with compile (builds or loads the kernels): {warm_up:.1f} s")
    rows = []
    for seed in args.seeds:
        rows.append((seed, rlfw_run(seed, args.steps, compile_mode), sb3_run(seed, args.steps)))
    print(f"\n{'seed':>4} | {'rlfw s':>7} {'eval':>6} | {'sb3 s':>7} {'eval':>6} | ratio")
    for seed, (t_ours, e_ours), (t_peer, e_peer) in rows:
        print(
            f"{seed:>4} | {t_ours:>7.1f} {e_ours:>6.1f} | {t_peer:>7.1f} {e_peer:>6.1f} | "
            f"{t_ours / t_peer:.2f}"
        )
    t_ours = sum(r[1][0] for r in rows)
    t_peer = sum(r[2][0] for r in rows)
    print(
        f"total time ratio rlfw/sb3 {t_ours / t_peer:.2f}; median eval rlfw "
        f"{statistics.median(r[1][1] for r in rows):.1f}, sb3 "
        f"{statistics.median(r[2][1] for r in rows):.1f}"
    )


if __name__ == "__main__":
    main()
