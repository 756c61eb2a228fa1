"""rlfw vs stable-baselines3: PPO on a MuJoCo task (default HalfCheetah-v5), same run.

Both run rl-baselines3-zoo's tuned HalfCheetah PPO (1 env x 512 steps, minibatch 64, 20
epochs, lr 2.06e-5, clip 0.1, γ 0.98, λ 0.92, 256-256 ReLU networks, initial log-std -2,
PyTorch's default init, observations normalized and rewards scaled): rlfw's HalfCheetah
preset is exactly these settings. The difference left: SB3's VecNormalize updates the
observation statistics at every env step, rlfw once per batch. `--preset` adds a run of
rlfw's MuJoCo family preset (CleanRL's settings). Same env steps, one torch thread each.
Prints wall-clock, env steps/s, the final policy's deterministic return over 10 episodes
(fresh envs, frozen normalization statistics) and the time ratio rlfw / SB3.

    python experiments/bench/continuous_vs_sb3.py --steps 1000000     # the issue's length
    python experiments/bench/continuous_vs_sb3.py --steps 100000      # what fits a session
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.launch.evaluate import evaluate_checkpoint


def rlfw_run(
    env_id: str, steps: int, seed: int, log_dir: str, zoo: bool = True
) -> tuple[float, float]:
    config = RunConfig.for_env(env_id, "ppo", seed=seed)
    if not zoo:  # the MuJoCo family preset: an id without a tuned entry gets it
        apply_overrides(
            config,
            {
                **preset("ppo", "Humanoid-v5"),
                "activation": "tanh",
                "log_std_init": 0.0,
                "ortho_init": True,
            },
        )
    apply_overrides(
        config,
        {
            "schedule": {
                "n_steps": steps,
                "eval_every": None,
                "log_every": max(steps // 10, 1),
                "checkpoint_every": 10 * steps,
            }
        },
    )
    start = time.perf_counter()
    with build_runner(config, log_dir, progress=False, stdout=False) as runner:
        runner.train()
    seconds = time.perf_counter() - start
    return seconds, float(evaluate_checkpoint(log_dir, 10, greedy=True, seed=seed + 100).mean())


def sb3_run(env_id: str, steps: int, seed: int) -> tuple[float, float]:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    env = VecNormalize(make_vec_env(env_id, n_envs=1, seed=seed))
    model = PPO(
        "MlpPolicy",
        env,
        seed=seed,
        verbose=0,
        batch_size=64,
        n_steps=512,
        gamma=0.98,
        learning_rate=2.0633e-05,
        ent_coef=0.000401762,
        clip_range=0.1,
        n_epochs=20,
        gae_lambda=0.92,
        max_grad_norm=0.8,
        vf_coef=0.58096,
        policy_kwargs=dict(
            log_std_init=-2,
            ortho_init=False,
            activation_fn=torch.nn.ReLU,
            net_arch=dict(pi=[256, 256], vf=[256, 256]),
        ),
    )
    start = time.perf_counter()
    model.learn(steps)
    seconds = time.perf_counter() - start
    eval_env = VecNormalize(
        make_vec_env(env_id, n_envs=1, seed=seed + 100), training=False, norm_reward=False
    )
    eval_env.obs_rms = env.obs_rms  # the statistics training ended with, frozen
    mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    return seconds, float(mean)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-dir", default=None, help="rlfw's run folder (default: runs/)")
    parser.add_argument(
        "--preset",
        action="store_true",
        help="also run rlfw's own MuJoCo preset (CleanRL's settings)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)  # both alike; 64-256 unit MLPs gain little from threads
    log_dir = args.log_dir or time.strftime(f"runs/bench-continuous-{args.env}-%Y%m%d-%H%M%S")
    rows = [("rlfw, zoo settings", rlfw_run(args.env, args.steps, args.seed, log_dir))]
    if args.preset:
        rows.append(
            (
                "rlfw, its preset",
                rlfw_run(args.env, args.steps, args.seed, log_dir + "-preset", zoo=False),
            )
        )
    peer = sb3_run(args.env, args.steps, args.seed)
    rows.append(("SB3, zoo settings", peer))
    print(f"\n{args.env}, {args.steps} env steps, seed {args.seed}")
    print(f"{'run':<20} {'seconds':>8} {'steps/s':>8} {'final eval':>11} {'time vs SB3':>12}")
    for name, (seconds, final) in rows:
        print(
            f"{name:<20} {seconds:>8.1f} {args.steps / seconds:>8.0f} {final:>11.1f} "
            f"{seconds / peer[0]:>11.2f}x"
        )


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
