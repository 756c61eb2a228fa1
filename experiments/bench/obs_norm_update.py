"""When to update the observation statistics: once per batch (rlfw's default) or at every
env step from the step's whole [B] row (SB3's VecNormalize), same preset otherwise.

Runs the env's PPO preset with ``obs_norm_update='batch'`` and ``'step'`` for several seeds
side by side (one torch thread and one core per run), evaluates every final policy the way
``rlfw benchmark`` does (deterministic actions, frozen statistics, 20 fresh episodes, seeds
10000 + seed) and prints per-seed returns, median, mean ± std and wall-clock per mode.

    python experiments/bench/obs_norm_update.py --env Hopper-v5 --steps 300000 --seeds 0 1 2
    python experiments/bench/obs_norm_update.py --env Acrobot-v1 --steps 120000 \
        --set normalize_obs=true --set batch_B=16 ...     # on top of the preset, every run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

MODES = ("batch", "step")


def one_run(
    env: str, mode: str, seed: int, steps: int, run_dir: str, assignments: list[str]
) -> dict:
    """Train and evaluate one run in this process (the child's side)."""
    import torch

    from rlfw.bench.run import EVAL_EPISODES, EVAL_SEED_OFFSET
    from rlfw.launch.build import build_runner
    from rlfw.launch.config import RunConfig, set_field
    from rlfw.launch.evaluate import evaluate_checkpoint

    torch.set_num_threads(1)
    config = RunConfig.for_env(env, "ppo", steps, seed=seed)
    for assignment in assignments:
        set_field(config, *assignment.split("=", 1))
    config.obs_norm_update = mode
    config.schedule.eval_every = None
    with build_runner(config, run_dir, progress=False, stdout=False) as runner:
        start = time.perf_counter()
        runner.train()
        wall = time.perf_counter() - start
    returns = evaluate_checkpoint(run_dir, EVAL_EPISODES, greedy=True, seed=EVAL_SEED_OFFSET + seed)
    return {"mode": mode, "seed": seed, "wall_s": wall, "final": float(returns.mean())}


def spawn(
    env: str, mode: str, seed: int, steps: int, out: str, assignments: list[str], cores=None
) -> dict:
    """``one_run`` in a child process pinned to ``cores`` (the backend's slice)."""
    run_dir = os.path.join(out, f"{mode}-s{seed}")
    pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
    argv = [
        sys.executable,
        __file__,
        "--child",
        json.dumps([env, mode, seed, steps, run_dir, assignments]),
    ]
    text = subprocess.run(argv, check=True, capture_output=True, text=True, preexec_fn=pin).stdout
    return json.loads(text.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="Hopper-v5")
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-parallel", type=int, default=2)
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="on top of the preset for every run, as rlfw train --set",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_run(*json.loads(args.child))))
        return
    from rlfw.launch.backends import LocalBackend

    out = tempfile.mkdtemp(prefix="obs_norm_update-")
    jobs = [
        (args.env, mode, seed, args.steps, out, args.set) for seed in args.seeds for mode in MODES
    ]
    results = LocalBackend(args.max_parallel).map(
        spawn,
        jobs,
        lambda r: print(
            f"  {r['mode']:5s} seed {r['seed']}: {r['final']:9.1f} in {r['wall_s']:.0f} s",
            flush=True,
        ),
    )
    print(
        f"\n{args.env}, PPO preset {' '.join(args.set)}, {args.steps:,} steps, seeds {args.seeds}"
    )
    print("| obs statistics | per-seed final return | median | mean ± std | wall s (mean) |")
    print("|---|---|---:|---|---:|")
    for mode in MODES:
        rows = [r for r in results if r["mode"] == mode]
        finals = np.array([r["final"] for r in rows])
        walls = np.array([r["wall_s"] for r in rows])
        print(
            f"| per {mode} | {', '.join(f'{x:,.1f}' for x in finals)} | "
            f"{np.median(finals):,.1f} | {finals.mean():,.1f} ± {finals.std():,.1f} | "
            f"{walls.mean():.0f} |"
        )


if __name__ == "__main__":
    main()
