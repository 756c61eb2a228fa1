"""The experiment scripts build exactly the run the CLI builds from the same flags: the same
config.json and bitwise-identical final checkpoints."""

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rlfw.runfolder.checkpoint import latest_checkpoint, load_checkpoint

from conftest import bits

ROOT = Path(__file__).parents[1]


def run_side_by_side(*argvs: list[str], cwd: Path) -> None:
    """Each ``python ARGV`` in its own process, all at once, each pinned to a core of its
    own (so each plans one torch thread: the same for all, and no two runs contend for a
    core); every one must succeed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cores = sorted(os.sched_getaffinity(0))
    procs = [
        subprocess.Popen(
            [sys.executable, *argv],
            cwd=cwd,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=functools.partial(os.sched_setaffinity, 0, [cores[i % len(cores)]]),
        )
        for i, argv in enumerate(argvs)
    ]
    try:
        outputs = [p.communicate(timeout=600) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    for argv, p, (out, err) in zip(argvs, procs, outputs):
        assert p.returncode == 0, f"{argv}:\n{out[-2000:]}{err[-3000:]}"


def same_bits(a, b, where: str = "checkpoint") -> None:
    """Assert two checkpoint trees hold the same structure, values and tensor bits."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        assert a.keys() == b.keys(), f"{where}: keys {sorted(a)} vs {sorted(b)}"
        for key in a:
            same_bits(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{where}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            same_bits(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(bits(a), bits(b)), f"{where}: tensors differ"
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert a.tobytes() == b.tobytes(), f"{where}: arrays differ"
    elif isinstance(a, bytes):  # pickled env state
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
        assert len(a) == len(b) and first is None, (
            f"{where}: pickles differ (lengths {len(a)}, {len(b)}; first at byte {first})"
        )
    elif isinstance(a, float) and a != a:
        assert b != b, where  # NaN == NaN here
    else:
        assert a == b, f"{where}: {a!r:.200} vs {b!r:.200}"


@pytest.mark.parametrize(
    "algo,env,steps",
    [
        ("ppo", "Pendulum-v1", 4096),
        ("ppo", "CartPole-v1", 1024),
        ("dqn", "CartPole-v1", 1024),  # learning starts at 1,000 steps
        ("a2c", "ALE/Breakout-v5", 80),  # 1 batch of 16 x 5: a whole update, bit for bit
    ],
)
@pytest.mark.integration
def test_script_and_cli_build_the_same_run(algo, env, steps, tmp_path):
    common = ["--env", env, "--steps", str(steps), "--seed", "1"]
    run_side_by_side(
        [str(ROOT / "experiments" / "train.py"), "--algo", algo, *common, "--log-dir", "A"],
        ["-m", "rlfw", "train", "--algo", algo, *common, "--log-dir", "B", "--no-progress"],
        cwd=tmp_path,
    )
    configs = [json.loads((tmp_path / d / "config.json").read_text()) for d in "AB"]
    assert configs[0] == configs[1]
    assert configs[0]["env"] == env and configs[0]["schedule"]["n_steps"] == steps
    paths = [latest_checkpoint(str(tmp_path / d)) for d in "AB"]
    assert [os.path.basename(p) for p in paths] == [os.path.basename(paths[0])] * 2
    # Every value and tensor bit; not the file bytes, which also hold torch's random
    # serialization id and pickle's identity-based memo (equal strings from argv or code).
    same_bits(*(load_checkpoint(p) for p in paths))
