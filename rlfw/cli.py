"""``python -m rlfw train|eval``: every flag documented in ``--help``."""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from typing import Any, Sequence

from rlfw.algos import ALGOS
from rlfw.launch.config import SAMPLERS, RunConfig, apply_overrides, build_runner, preset


def _train_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train an agent", description=(
        "Train PPO, A2C or DQN. Unset flags take the tuned preset for the algorithm and env "
        "family (classic control or Atari); see rlfw.launch.config.preset."))
    p.add_argument("--algo", default="ppo", help=f"algorithm, one of {ALGOS} (default ppo)")
    p.add_argument("--env", default="CartPole-v1",
                   help="gymnasium id, e.g. CartPole-v1 or ALE/Pong-v5 (default CartPole-v1)")
    p.add_argument("--sampler", default="serial",
                   help=f"one of {SAMPLERS} (default serial; native: ALE ids only)")
    p.add_argument("--n-envs", type=int, help="parallel envs B per batch (preset: 8)")
    p.add_argument("--n-workers", type=int,
                   help="worker processes of parallel samplers (default: usable cores)")
    p.add_argument("--pin-cpus", action="store_true", help="pin sampler worker i to core i")
    p.add_argument("--batch-T", type=int, help="steps per env per batch T (preset)")
    p.add_argument("--steps", type=int, help="total env steps (default 120k; Atari 10M)")
    p.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    p.add_argument("--log-dir", help="run folder (default runs/<algo>-<env>-s<seed>-<time>)")
    p.add_argument("--lr", type=float, help="learning rate (preset)")
    p.add_argument("--entropy-coef", type=float, help="entropy bonus coefficient (preset)")
    p.add_argument("--model", choices=("auto", "mlp", "cnn"), default="auto",
                   help="network: auto picks the Nature CNN for uint8 images, else an MLP")
    p.add_argument("--device", default="cpu", help="torch device for the model (default cpu)")
    p.add_argument("--eval-every", type=int, help="env steps between evaluations (default 10k)")
    p.add_argument("--eval-episodes", type=int, default=10,
                   help="episodes per evaluation (default 10)")
    p.add_argument("--eval-sampled", action="store_true",
                   help="evaluate with sampled actions instead of greedy ones")
    p.add_argument("--checkpoint-every", type=int, default=50_000,
                   help="env steps between checkpoints (default 50k; one is always written "
                        "at the end)")
    p.add_argument("--keep-checkpoints", type=int, default=3,
                   help="newest checkpoints kept (default 3)")
    p.add_argument("--stop-at-return", type=float,
                   help="stop early once an evaluation's mean return reaches this")
    p.add_argument("--save-replay", action="store_true",
                   help="dqn: also checkpoint the replay buffer so a resumed run is bitwise "
                        "identical (large on Atari)")
    p.add_argument("--dueling", action="store_true", help="dqn: dueling Q head")
    p.add_argument("--double", action="store_true", help="dqn: double-DQN targets")
    p.add_argument("--apex-epsilon", action="store_true",
                   help="dqn: fixed per-slot exploration 0.4^(1 + 7 i/(B-1)), as in Ape-X")
    p.add_argument("--n-step", type=int, help="dqn: n-step returns (default 1)")
    p.add_argument("--prioritized", action="store_true", help="dqn: prioritized replay")
    p.add_argument("--sticky-actions", type=float,
                   help="Atari sticky-action probability (default 0.0)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--resume", metavar="RUN_DIR",
                   help="continue the run in RUN_DIR from its newest checkpoint, with its saved "
                        "config (other flags are ignored)")


def _eval_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate a run's newest checkpoint",
                       description="Load RUN_DIR's config and newest checkpoint, play episodes "
                                   "on evaluation envs and print mean ± std return.")
    p.add_argument("run_dir", help="a folder written by `rlfw train`")
    p.add_argument("--episodes", type=int, default=10, help="episodes to play (default 10)")
    p.add_argument("--sampled", action="store_true", help="sample actions instead of greedy")
    p.add_argument("--seed", type=int, default=12345,
                   help="evaluation seed (default 12345, unlike any training seed)")


def _bench_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench-sampler", help="env steps/s of a sampler with a random agent",
                       description="Measure a sampler's env steps per second with a uniform-"
                                   "random agent, to pick the fastest sampler for a machine.")
    p.add_argument("--env", default="ALE/Pong-v5", help="gymnasium id (default ALE/Pong-v5)")
    p.add_argument("--sampler", default="cpu", help=f"one of {SAMPLERS} (default cpu)")
    p.add_argument("--n-envs", type=int, default=8, help="envs B (default 8)")
    p.add_argument("--n-workers", type=int, help="worker processes (default: usable cores)")
    p.add_argument("--batch-T", type=int, default=64, help="steps per batch (default 64)")
    p.add_argument("--seconds", type=float, default=10.0, help="timed duration (default 10)")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlfw", description="rlfw: modular deep RL")
    sub = parser.add_subparsers(dest="command", required=True)
    _train_parser(sub)
    _eval_parser(sub)
    _bench_parser(sub)
    return parser


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """Preset for (algo, env family), then every flag the user set on top of it."""
    from rlfw.envs import is_atari

    if args.algo not in ALGOS:
        raise ValueError(f"algorithm {args.algo!r} unknown; choose from {ALGOS}")
    config = apply_overrides(RunConfig(algo=args.algo, env=args.env), preset(args.algo, args.env))
    overrides: dict[str, Any] = {"sampler": args.sampler, "seed": args.seed,
                                 "model": args.model, "device": args.device}
    if args.n_envs is not None:
        overrides["n_envs"] = args.n_envs
    if args.n_workers is not None:
        overrides["n_workers"] = args.n_workers
    overrides["pin_cpus"] = args.pin_cpus
    if args.batch_T is not None:
        overrides["batch_T"] = args.batch_T
    algo_overrides = {}
    if args.lr is not None:
        algo_overrides["learning_rate"] = args.lr
    if args.entropy_coef is not None:
        algo_overrides["entropy_coef"] = args.entropy_coef
    if args.algo == "dqn":
        algo_overrides.update(save_replay=args.save_replay, dueling=args.dueling,
                              prioritized=args.prioritized, double_dqn=args.double,
                              apex_epsilon=args.apex_epsilon)
        if args.n_step is not None:
            algo_overrides["n_step"] = args.n_step
    if algo_overrides:
        overrides[args.algo] = algo_overrides
    default_steps = 10_000_000 if is_atari(args.env) else 120_000
    steps = args.steps if args.steps is not None else default_steps
    overrides["schedule"] = {
        "n_steps": steps, "eval_episodes": args.eval_episodes,
        "eval_greedy": not args.eval_sampled, "checkpoint_every": args.checkpoint_every,
        "keep_checkpoints": args.keep_checkpoints, "stop_at_return": args.stop_at_return,
        "eval_every": args.eval_every if args.eval_every is not None else min(
            max(steps // 10, 1), 250_000),
        "log_every": min(max(steps // 20, 1), 100_000),
    }
    if args.sticky_actions is not None:
        overrides["atari"] = {"sticky_action_prob": args.sticky_actions}
    return apply_overrides(config, overrides)


def default_log_dir(config: RunConfig) -> str:
    env = re.sub(r"[^A-Za-z0-9_.-]+", "_", config.env)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{config.algo}-{env}-s{config.seed}-{stamp}")


def cmd_train(args: argparse.Namespace) -> int:
    if args.resume:
        config = RunConfig.load(args.resume)
        runner = build_runner(config, args.resume, resume=True, progress=not args.no_progress)
        log_dir = args.resume
    else:
        config = config_from_args(args)
        config.validate()
        log_dir = args.log_dir or default_log_dir(config)
        runner = build_runner(config, log_dir, progress=not args.no_progress)
    print(f"rlfw: {config.algo} on {config.env}, sampler {config.sampler}, "
          f"{config.n_envs} envs x {config.batch_T} steps, {config.schedule.n_steps} steps -> "
          f"{log_dir}")
    result = runner.train()
    status = "interrupted" if result.interrupted else "done"
    print(f"rlfw: {status} after {result.env_steps} env steps; last eval return "
          f"{result.eval_return:.2f}, best {result.best_eval_return:.2f}; run folder {log_dir}")
    return 130 if result.interrupted else 0


def cmd_eval(args: argparse.Namespace) -> int:
    from rlfw.launch.evaluate import evaluate_run

    returns = evaluate_run(args.run_dir, args.episodes, greedy=not args.sampled, seed=args.seed)
    print(f"{args.run_dir}: mean return {returns.mean():.2f} ± {returns.std():.2f} over "
          f"{len(returns)} episodes")
    return 0


def cmd_bench_sampler(args: argparse.Namespace) -> int:
    from rlfw.agents.random_agent import RandomAgent
    from rlfw.envs import EnvSpaces
    from rlfw.launch.config import build_sampler
    from rlfw.samplers.throughput import measure_steps_per_second

    if args.seconds <= 0:
        raise ValueError(f"--seconds must be > 0, got {args.seconds}")
    config = RunConfig(env=args.env, sampler=args.sampler, n_envs=args.n_envs,
                       batch_T=args.batch_T, n_workers=args.n_workers)
    config.validate()
    env_factory = config.env_factory()
    agent = RandomAgent(EnvSpaces.of(env_factory).action)
    rate = measure_steps_per_second(build_sampler(config, env_factory), agent, args.seconds)
    print(f"{args.sampler} sampler on {args.env}: {rate:,.0f} env steps/s "
          f"({args.n_envs} envs, {args.n_workers or 'default'} workers, T={args.batch_T})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "train":
            return cmd_train(args)
        if args.command == "bench-sampler":
            return cmd_bench_sampler(args)
        return cmd_eval(args)
    except (ValueError, FileNotFoundError) as err:
        parser.exit(2, f"rlfw: error: {err}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
