"""Does every env a newcomer reaches for train on defaults, or say in one line why not?

Walks gymnasium's registry (every id whose namespace is gymnasium's own: classic control,
toy text, Box2D, MuJoCo) and one id per family of the extras (MiniGrid, BabyAI, MinAtar,
ALE, gymnasium-robotics, PettingZoo's MPE), running ``rlfw train --env ID --steps N`` for
each as a new user would, each in its own process with a time limit. A run passes when it
ends with rc 0, or with rc != 0 and one line on stderr without a traceback; it fails when
it hangs past the limit or prints a traceback. Writes a markdown table (``--out``).

    python experiments/registry_walk.py [--steps 2048] [--timeout 600] [--out FILE]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

import gymnasium as gym

# One id per family of the extras (the extras' registries hold hundreds).
EXTRA_FAMILIES = (
    "MiniGrid-DoorKey-5x5-v0",
    "BabyAI-GoToRedBallGrey-v0",
    "MinAtar/Breakout-v1",
    "ALE/Pong-v5",
    "FetchReach-v4",
    "FrankaKitchen-v1",
    "mpe2.simple_spread_v3",
)


def gymnasium_ids() -> list[str]:
    """gymnasium's own ids (no namespace): the registry a plain ``import gymnasium`` has,
    its old MuJoCo versions (-v2, -v3: mujoco-py) and compatibility ids included (read
    before ale_py registers its legacy ids, which have no namespace either)."""
    return sorted(env_id for env_id, spec in gym.registry.items() if spec.namespace is None)


def walk_one(env_id: str, steps: int, timeout: float) -> tuple[str, float, str]:
    """(verdict, seconds, the last line the run printed) of ``rlfw train --env env_id``."""
    with tempfile.TemporaryDirectory() as run_dir:
        command = [sys.executable, "-m", "rlfw", "train", "--env", env_id, "--steps", str(steps)]
        start = time.perf_counter()
        try:
            done = subprocess.run(
                [*command, "--log-dir", f"{run_dir}/run"],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return "HANG", time.perf_counter() - start, f"no end within {timeout:.0f} s"
        seconds = time.perf_counter() - start
    out = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    last = out[-1].strip() if out else ""
    if done.returncode == 0:
        return "trains", seconds, last
    if "Traceback (most recent call last)" in done.stderr:
        return "TRACEBACK", seconds, last
    return "one line", seconds, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2048, help="Env steps per run.")
    parser.add_argument("--timeout", type=float, default=600, help="Seconds before a run hangs.")
    parser.add_argument("--out", default=None, help="Write the markdown table here too.")
    parser.add_argument("--ids", nargs="+", default=None, help="Only these ids.")
    args = parser.parse_args()
    ids = args.ids or [*gymnasium_ids(), *EXTRA_FAMILIES]  # before anything registers more
    rows = ["| env id | verdict | seconds | last line |", "|---|---|---|---|"]
    bad = 0
    for env_id in ids:
        verdict, seconds, last = walk_one(env_id, args.steps, args.timeout)
        bad += verdict in ("HANG", "TRACEBACK")
        line = last.replace("|", "\\|")[:160]
        rows.append(f"| `{env_id}` | {verdict} | {seconds:.0f} | {line} |")
        print(rows[-1], flush=True)
    summary = f"{len(ids)} ids, {bad} hang or print a traceback (--steps {args.steps})"
    print(summary)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("\n".join([*rows, "", summary, ""]))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
