"""The wheels the lent GPU machine needs for ``experiments/gpu_check.py``, and the command.

The device tool's machine has Python 3.12 with its own torch and numpy and no network, so
rlfw's other dependencies travel with the working tree as wheels. This downloads them
into ``.whl/`` (git-ignored), each in the version this interpreter has (the versions the
suite tests with), and prints the device command that installs them and runs the check.

    .venv/bin/python experiments/gpu_wheels.py    # then the device tool: carry [".whl"]

OpenCV stays behind: its wheel (~64 MB) is the whole tree's allowance (64 MiB) by itself.
gymnasium's Atari frame resize needs it, so where the machine lacks it the command runs
the check's sampler and runner rows on MinAtar/Breakout-v1, and the table names that env.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# rlfw's imports; MuJoCo and what gymnasium's MuJoCo envs import (HalfCheetah, for the
# SAC/TD3 rows); MinAtar (the fallback env); the peer the SAC/TD3 rows time against
PACKAGES = (
    "gymnasium",
    "farama-notifications",
    "cloudpickle",
    "ale-py",
    "psutil",
    "tqdm",
    "mujoco",
    "absl-py",
    "etils",
    "glfw",
    "pyopengl",
    "imageio",
    "minatar",
    "stable-baselines3",
)
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
DEVICE_COMMAND = (
    "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "
    "--target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 "
    "MUJOCO_GL=egl || exit; ENV=ALE/Pong-v5; python3 -c 'import cv2' 2>/dev/null || "
    "ENV=MinAtar/Breakout-v1; nvidia-smi -L; python3 experiments/gpu_check.py --env $ENV "
    "--out $OUT/gpu 2>&1 | tee $OUT/log"
)


def pinned(packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """``name==version`` for each package, as this interpreter has it installed."""
    missing = []
    pins = []
    for name in packages:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        raise SystemExit(
            f"gpu_wheels: {missing} not installed in {sys.executable}; run it with the "
            "checkout's .venv/bin/python (make venv installs them)"
        )
    return pins


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", default=os.path.join(ROOT, ".whl"), help="wheel folder")
    parser.add_argument("--python-version", default="3.12", help="the device's Python")
    args = parser.parse_args()
    shutil.rmtree(args.dest, ignore_errors=True)
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        + ["--python-version", args.python_version, "--implementation", "cp", *platforms]
        + ["-d", args.dest, *pinned()],
        check=True,
    )
    size = sum(os.path.getsize(os.path.join(args.dest, f)) for f in os.listdir(args.dest))
    print(f"{len(os.listdir(args.dest))} wheels, {size / 2**20:.1f} MiB in {args.dest}")
    print('device command (carry [".whl"], timeout_s 540):')
    print(DEVICE_COMMAND)
    print("then copy its gpu/README.md and gpu/results.json into docs/gpu/ and commit them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
