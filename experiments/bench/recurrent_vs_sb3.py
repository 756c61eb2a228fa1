"""rlfw's recurrent PPO vs sb3-contrib's RecurrentPPO on CartPole without velocities, the
same settings, seed by seed in one run.

Both: rl-zoo's ppo_lstm CartPoleNoVel-v1 settings (8 envs x 32 steps, one minibatch of
256 per epoch, 20 epochs, LR 1e-3 and clip 0.2 annealed linearly, gamma 0.98, GAE 0.8, no
entropy bonus, max grad norm 0.5, normalized observations) with the same network:
observations -> LSTM(128) -> linear heads, the critic with an LSTM of its own (rlfw
``hidden=() rnn_critic=true``; SB3 ``net_arch=[] lstm_hidden_size=128
enable_critic_lstm=True``). Differences left: SB3 normalizes observations with
``VecNormalize`` (updated at every env step), rlfw once per batch after the update; SB3's
Adam eps 1e-5, rlfw's 1e-8 (the zoo file leaves SB3's own). The final policy of each is
played for 20 episodes, deterministic actions, frozen statistics.

    python experiments/bench/recurrent_vs_sb3.py [--seeds 0 1 2] [--steps 150000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from rlfw.envs import CARTPOLE_NO_VELOCITY
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig

EVAL_EPISODES = 20


def rlfw_run(steps: int, seed: int) -> tuple[float, float]:
    config = RunConfig.for_env(
        CARTPOLE_NO_VELOCITY,
        algo="ppo",
        steps=steps,
        seed=seed,
        recurrent="lstm",
        rnn_size=128,
        hidden=(),
        rnn_critic=True,
    )
    config.schedule.eval_every = None  # evaluated once, at the end, as SB3 is
    start = time.perf_counter()
    with build_runner(config, None, progress=False, stdout=False) as runner:
        runner.train()
        seconds = time.perf_counter() - start
        final = runner.sampler.evaluate(EVAL_EPISODES, greedy=True)
    return seconds, sum(e.ret for e in final) / len(final)


def sb3_run(steps: int, seed: int) -> tuple[float, float]:
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    import rlfw.envs  # noqa: F401  (registers rlfw/CartPoleNoVel-v1)

    env = VecNormalize(make_vec_env(CARTPOLE_NO_VELOCITY, n_envs=8, seed=seed), norm_reward=False)
    model = RecurrentPPO(
        "MlpLstmPolicy",
        env,
        seed=seed,
        verbose=0,
        n_steps=32,
        batch_size=256,
        n_epochs=20,
        learning_rate=lambda frac: 1e-3 * frac,
        clip_range=lambda frac: 0.2 * frac,
        gamma=0.98,
        gae_lambda=0.8,
        ent_coef=0.0,
        policy_kwargs=dict(net_arch=[], lstm_hidden_size=128, enable_critic_lstm=True),
    )
    start = time.perf_counter()
    model.learn(steps)
    seconds = time.perf_counter() - start
    eval_env = VecNormalize(
        make_vec_env(CARTPOLE_NO_VELOCITY, n_envs=1, seed=seed + 100),
        norm_reward=False,
        training=False,
    )
    eval_env.obs_rms = env.obs_rms
    mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=EVAL_EPISODES, deterministic=True)
    return seconds, float(mean)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=150_000)
    args = parser.parse_args()
    torch.set_num_threads(1)  # both alike: small networks gain nothing from threads
    rlfw_run(8 * 32 * 2, 0)  # warm-up: one-time imports stay out of both timings
    sb3_run(8 * 32 * 2, 0)
    rows = []
    for seed in args.seeds:
        rows.append((seed, rlfw_run(args.steps, seed), sb3_run(args.steps, seed)))
        seed_, (t_ours, r_ours), (t_peer, r_peer) = rows[-1]
        print(
            f"seed {seed_}: rlfw {r_ours:6.1f} in {t_ours:6.1f} s | sb3-contrib {r_peer:6.1f} "
            f"in {t_peer:6.1f} s | time ratio {t_ours / t_peer:.2f}",
            flush=True,
        )
    ours = [r for _, (_, r), _ in rows]
    peer = [r for _, _, (_, r) in rows]
    time_ours = sum(t for _, (t, _), _ in rows)
    time_peer = sum(t for _, _, (t, _) in rows)
    print(
        f"\nmedian final return: rlfw {statistics.median(ours):.1f}, "
        f"sb3-contrib {statistics.median(peer):.1f}; total time ratio rlfw/sb3-contrib "
        f"{time_ours / time_peer:.2f} (goal <= 0.4)"
    )


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
