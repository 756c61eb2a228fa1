"""rlfw's SAC and TD3 against stable-baselines3's, per env step, interleaved in one run.

Same settings on both sides: one env, one gradient update per env step (SB3's
``train_freq=1, gradient_steps=1``; rlfw's ``batch_B=1, batch_T=1, replay_ratio=1``),
batch 256, SB3's networks (SAC 256x256, TD3 400x300, ReLU). Each side first fills
``--warmup`` steps of uniform actions (untimed past that), then ``--steps`` more env
steps with an update each are timed; rounds alternate rlfw, SB3, rlfw, SB3... so both see
the same machine load. Prints each round's ms per env step and the ratio rlfw / SB3 (the
issue's goal: <= 0.5).

    python experiments/bench/offpolicy_vs_sb3.py [--env HalfCheetah-v5] [--algo sac td3]
        [--steps 2000] [--rounds 2] [--matmul-precision highest|high|medium]
        [--peer-matmul-precision ...] [--device cpu|cuda]

``--matmul-precision`` is rlfw's ``matmul_precision`` setting (its updates only); SB3 has
no such setting, so its whole ``learn`` runs under ``torch.set_float32_matmul_precision``
of ``--peer-matmul-precision`` (default: the same value). ``--device cuda`` puts both
sides' networks and updates on the GPU (the env stays on the CPU, as it does for both);
there the update is launch-bound rather than compute-bound. ``experiments/gpu_check.py``
calls these functions for its off-policy rows.
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import torch

from rlfw.algos.qpg.base import MATMUL_PRECISIONS, float32_matmul_precision
from rlfw.envs import EnvFactory, EnvSpaces
from rlfw.launch.build import build_agent, build_algo
from rlfw.launch.config import RunConfig
from rlfw.samplers import SerialSampler


def rlfw_ms_per_step(
    algo: str,
    env_id: str,
    warmup: int,
    steps: int,
    seed: int,
    precision: str = "highest",
    device: str = "cpu",
) -> float:
    config = RunConfig.for_env(env_id, algo, steps=warmup + steps + 1, seed=seed, device=device)
    own = config.algo_config()
    own.learning_starts, own.batch_size, own.matmul_precision = warmup, 256, precision
    factory = EnvFactory(env_id)
    spaces = EnvSpaces.of(factory)
    agent, learner = build_agent(config, spaces), build_algo(config, spaces)
    with SerialSampler(factory, 1, 1, seed=seed) as sampler:
        sampler.initialize(agent)
        learner.initialize(agent, warmup + steps, seed=seed)
        for itr in range(warmup):
            learner.optimize(sampler.obtain_samples(itr)[0], itr)
        start = time.perf_counter()
        for itr in range(warmup, warmup + steps):
            learner.optimize(sampler.obtain_samples(itr)[0], itr)
        return 1000 * (time.perf_counter() - start) / steps


def sb3_ms_per_step(
    algo: str,
    env_id: str,
    warmup: int,
    steps: int,
    seed: int,
    precision: str = "highest",
    device: str = "cpu",
) -> float:
    import numpy as np
    from stable_baselines3 import SAC, TD3
    from stable_baselines3.common.noise import NormalActionNoise

    env = gym.make(env_id)
    if algo == "sac":
        model = SAC(
            "MlpPolicy", env, learning_starts=warmup, batch_size=256, seed=seed, device=device
        )
    else:
        dims = env.action_space.shape[0]
        noise = NormalActionNoise(np.zeros(dims), 0.1 * np.ones(dims))
        model = TD3(
            "MlpPolicy",
            env,
            learning_starts=warmup,
            batch_size=256,
            seed=seed,
            action_noise=noise,
            device=device,
        )
    model.learn(warmup)  # the warm-up, untimed
    with float32_matmul_precision(precision):
        start = time.perf_counter()
        model.learn(steps, reset_num_timesteps=False)
        return 1000 * (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="HalfCheetah-v5")
    parser.add_argument("--algo", nargs="+", default=["sac", "td3"], choices=("sac", "td3"))
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--matmul-precision", default="highest", choices=MATMUL_PRECISIONS)
    parser.add_argument("--peer-matmul-precision", choices=MATMUL_PRECISIONS)
    parser.add_argument("--device", default="cpu", help="both sides' networks: cpu or cuda")
    args = parser.parse_args()
    peer_precision = args.peer_matmul_precision or args.matmul_precision
    torch.set_num_threads(1)  # both alike: the learner process's one thread
    for algo in args.algo:
        ours, theirs = [], []
        for round_ in range(args.rounds):
            ours.append(
                rlfw_ms_per_step(
                    algo,
                    args.env,
                    args.warmup,
                    args.steps,
                    round_,
                    args.matmul_precision,
                    args.device,
                )
            )
            theirs.append(
                sb3_ms_per_step(
                    algo, args.env, args.warmup, args.steps, round_, peer_precision, args.device
                )
            )
            print(
                f"{algo} round {round_}: rlfw {ours[-1]:.2f} ms/step, SB3 {theirs[-1]:.2f} "
                f"ms/step, ratio {ours[-1] / theirs[-1]:.2f}",
                flush=True,
            )
        ours_ms, theirs_ms = statistics.median(ours), statistics.median(theirs)
        print(
            f"{algo} on {args.env}, {args.device} (matmul precision: rlfw "
            f"{args.matmul_precision}, SB3 {peer_precision}): rlfw {ours_ms:.2f} ms/step, "
            f"SB3 {theirs_ms:.2f} ms/step (medians of {args.rounds}); rlfw/SB3 "
            f"{ours_ms / theirs_ms:.2f}"
        )


if __name__ == "__main__":
    main()
