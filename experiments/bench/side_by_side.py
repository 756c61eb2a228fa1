"""Two `rlfw train` runs side by side on the machine: is each still at a fair share of its
speed alone, and does each end with the bits it has alone?

For each of PPO CartPole-v1, DQN MinAtar Breakout and R2D1 CartPole without velocities:
one run alone, then the same run twice at once (separate run folders), every run its own
`rlfw train` process with the environment's default threads (no OMP_NUM_THREADS). Prints
each run's seconds, the side-by-side speed as a fraction of alone (goal: >= 0.4 on 2
cores), and whether the final checkpoint's weights are bitwise the alone run's.
`--torch-threads 2` shows the learner threads rlfw took before it chose by network size.

    python experiments/bench/side_by_side.py [--only ppo] [--torch-threads N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch

from rlfw.runfolder.checkpoint import latest_checkpoint, load_checkpoint

RUNS = {
    "ppo": ["--algo", "ppo", "--env", "CartPole-v1", "--steps", "30000"],
    "dqn": ["--algo", "dqn", "--env", "MinAtar/Breakout-v1", "--steps", "15000"],
    "r2d1": ["--algo", "r2d1", "--env", "rlfw/CartPoleNoVel-v1", "--steps", "15000"],
}


def start(flags: list[str], folder: str, threads: int | None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    extra = [] if threads is None else ["--set", f"torch_threads={threads}"]
    argv = [
        sys.executable,
        "-m",
        "rlfw",
        "train",
        *flags,
        "--seed",
        "0",
        "--no-progress",
        "--eval-every",
        "none",
        "--log-dir",
        folder,
        *extra,
    ]
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def run_at_once(flags: list[str], folders: list[str], threads: int | None) -> list[float]:
    """Start one run per folder at the same moment; each one's seconds."""
    began = time.perf_counter()
    procs = [start(flags, folder, threads) for folder in folders]
    seconds = [0.0] * len(procs)
    pending = set(range(len(procs)))
    while pending:
        for i in list(pending):
            if procs[i].poll() is not None:
                seconds[i] = time.perf_counter() - began
                pending.discard(i)
        time.sleep(0.05)
    for proc in procs:
        if proc.returncode != 0:
            raise RuntimeError(f"rlfw train {' '.join(flags)} failed:\n{proc.stderr.read()}")
    return seconds


def weights(folder: str) -> dict[str, torch.Tensor]:
    return load_checkpoint(latest_checkpoint(folder))["agent"]


def same_bits(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(RUNS), nargs="+", default=list(RUNS))
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=None,
        help="set every run's torch_threads (default: rlfw's choice)",
    )
    args = parser.parse_args()
    print(f"{'run':<6} {'alone s':>8} {'side by side s':>16} {'speed vs alone':>15}  bits")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            alone = os.path.join(tmp, f"{name}-alone")
            pair = [os.path.join(tmp, f"{name}-side-{i}") for i in range(2)]
            (t_alone,) = run_at_once(RUNS[name], [alone], args.torch_threads)
            t_pair = run_at_once(RUNS[name], pair, args.torch_threads)
            ratio = t_alone / max(t_pair)
            bits = all(same_bits(weights(alone), weights(folder)) for folder in pair)
            sides = " / ".join(f"{t:.1f}" for t in t_pair)
            print(
                f"{name:<6} {t_alone:>8.1f} {sides:>16} {ratio:>14.2f}x  "
                f"{'same' if bits else 'DIFFERENT'}",
                flush=True,
            )


if __name__ == "__main__":
    main()
