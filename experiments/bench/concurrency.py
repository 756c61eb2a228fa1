"""Sync vs concurrent vs async runner, PPO on Pong and on CartPole, plus SB3 PPO on Pong, in
one run: training env steps/s and the ratios.

Pong: the Atari preset (8 envs x 128 steps, Nature CNN on CPU, 8 epochs of 128-minibatches)
in float32 (the preset's bf16 autocast is off here: SB3 has none, and this compares runners
and frameworks, not precisions) with the cpu sampler (2 workers); SB3: PPO with
rl-baselines3-zoo's Atari settings, its epochs and minibatch the preset's, on
SubprocVecEnv. CartPole: the CartPole preset with the cpu
sampler. Two bounds, both from the sync run: learn-only (steps over the learner's own
time: what overlap would reach if sampling cost nothing) and the CPU bound (the run's CPU
time, this process and its workers, spread perfectly over the usable cores: the most any
overlap can reach here).

    python experiments/bench/concurrency.py [--pong-steps 8192] [--cartpole-steps 40960]
"""

from __future__ import annotations

import argparse
import resource
import time

from rlfw.algos.pg.presets import ppo_preset
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.runners import RunSchedule
from rlfw.samplers.machinery.workers import usable_cpus

RUNNERS = ("sync", "concurrent", "async")


def cpu_seconds() -> float:
    """CPU time of this process and of its finished (joined) children."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def rlfw_rate(
    env: str, runner: str, steps: int, sampler: str = "cpu"
) -> tuple[float, float, float]:
    """(env steps/s of the whole run, learn-only steps/s, CPU-bound steps/s: the rate if
    the run's CPU time were spread perfectly over the usable cores)."""
    config = apply_overrides(
        RunConfig(algo="ppo", env=env, sampler=sampler, n_workers=2, runner=runner),
        preset("ppo", env),
    )
    config.ppo.amp = None  # float32 like the SB3 peer
    config.schedule = RunSchedule(
        n_steps=steps, log_every=10 * steps, checkpoint_every=10 * steps, eval_every=None
    )
    start, cpu_start = time.perf_counter(), cpu_seconds()
    with build_runner(config, None, progress=False, stdout=False) as run:
        learn_s = [0.0]
        optimize = run.algo.optimize

        def timed(samples, itr):
            began = time.perf_counter()
            out = optimize(samples, itr)
            learn_s[0] += time.perf_counter() - began
            return out

        run.algo.optimize = timed
        run.train()
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
    return steps / seconds, steps / learn_s[0], steps / (cpu / len(usable_cpus()))


def sb3_pong_rate(steps: int) -> float:
    import ale_py
    import gymnasium
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gymnasium.register_envs(ale_py)  # fork-started workers inherit the registration
    env = VecFrameStack(
        make_atari_env(
            "ALE/Pong-v5",
            n_envs=8,
            seed=0,
            vec_env_cls=_subproc(),
            vec_env_kwargs={"start_method": "fork"},
        ),
        n_stack=4,
    )
    atari = ppo_preset("ALE/Pong-v5", "atari")
    ppo = atari["ppo"]
    model = PPO(
        "CnnPolicy",
        env,
        n_steps=atari["batch_T"],
        n_epochs=ppo["epochs"],
        batch_size=ppo["minibatch_size"],
        learning_rate=ppo["learning_rate"],
        clip_range=ppo["clip"],
        vf_coef=0.5,
        ent_coef=ppo["entropy_coef"],
        verbose=0,
    )
    start = time.perf_counter()
    model.learn(steps)
    seconds = time.perf_counter() - start
    env.close()
    return steps / seconds


def _subproc():
    from stable_baselines3.common.vec_env import SubprocVecEnv

    return SubprocVecEnv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pong-steps", type=int, default=8 * 128 * 8)
    parser.add_argument("--cartpole-steps", type=int, default=8 * 32 * 160)
    parser.add_argument("--no-sb3", action="store_true")
    args = parser.parse_args()
    rlfw_rate("CartPole-v1", "sync", 8 * 32 * 4)  # warm-up: imports stay out of the timings
    table = []
    for env, steps in (("ALE/Pong-v5", args.pong_steps), ("CartPole-v1", args.cartpole_steps)):
        rates = {runner: rlfw_rate(env, runner, steps) for runner in RUNNERS}
        table.append((env, steps, rates))
    sb3 = None if args.no_sb3 else sb3_pong_rate(args.pong_steps)
    print(
        f"\n{'env':<12} {'runner':<11} {'steps/s':>9} {'vs sync':>8} {'vs SB3':>7} "
        f"{'vs learn-only':>14} {'vs CPU bound':>13}"
    )
    for env, steps, rates in table:
        sync, learn_only, cpu_bound = rates["sync"]  # bounds from the sync run
        for runner, (rate, _, _) in rates.items():
            vs_sb3 = f"{rate / sb3:>6.2f}x" if sb3 and env.startswith("ALE") else f"{'':>7}"
            print(
                f"{env.split('/')[-1]:<12} {runner:<11} {rate:>9,.0f} {rate / sync:>7.2f}x "
                f"{vs_sb3} {rate / learn_only:>13.2f}x {rate / cpu_bound:>12.2f}x"
            )
        for name, bound in (("learn-only", learn_only), ("CPU bound", cpu_bound)):
            print(f"{env.split('/')[-1]:<12} {name:<11} {bound:>9,.0f} {bound / sync:>7.2f}x")
    if sb3:
        print(f"{'Pong-v5':<12} {'SB3 PPO':<11} {sb3:>9,.0f}")


if __name__ == "__main__":
    main()
