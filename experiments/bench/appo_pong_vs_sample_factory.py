"""APPO on Pong: rlfw's async runner against Sample Factory's APPO, env steps/s, one sitting.

Both train APPO on Pong (4 frames skipped per agent step, 84x84 grey, 4 stacked) for the
same wall-clock time on this machine, with the same batch: 8 envs x 128 steps = 1,024
agent steps per batch, the same epochs and minibatches (``--work``: rlfw's Atari preset,
8 epochs of 128, or Sample Factory's Atari defaults, 4 epochs of 256). Each framework
runs with its own defaults otherwise (threads, workers, the network: Nature CNN in both).
The rate is agent steps (not frames) per second after a warm-up, as each reports it: rlfw
per finished batch, Sample Factory from its periodic "Total num frames" log lines with
``--summaries_use_frameskip=False``.

Sample Factory 2.1.1 lives in its own virtual environment (it needs gymnasium < 1.0);
made on first use from the package index:

    python -m venv .peers/sample-factory
    .peers/sample-factory/bin/pip install torch==2.13.0
    .peers/sample-factory/bin/pip install -c <(echo torch==2.13.0) \\
        sample-factory==2.1.1 gymnasium==0.29.1 ale-py==0.9.1

ale-py 0.9 registers its games only when imported, so Sample Factory's Atari example runs
through a two-line launcher that imports it first (its worker processes re-import it).

    python experiments/bench/appo_pong_vs_sample_factory.py [--seconds 180] [--work rlfw]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime

from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.runners import RunSchedule

ENV = "ALE/Pong-v5"
PEER_VENV = os.path.join(".peers", "sample-factory")
PEER_PACKAGES = ("sample-factory==2.1.1", "gymnasium==0.29.1", "ale-py==0.9.1")
N_ENVS, ROLLOUT = 8, 128
# (epochs, minibatch size) of each side's choice of per-batch learning work
WORK = {"rlfw": (8, 128), "sample-factory": (4, 256)}
LAUNCHER = "import ale_py  # noqa: F401\nfrom sf_examples.atari.train_atari import main\n"
LAUNCHER += 'if __name__ == "__main__":\n    main()\n'


def peer_python() -> str:
    """Sample Factory's interpreter, its environment made first if missing."""
    python = os.path.join(PEER_VENV, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", PEER_VENV], check=True)
        pip = [python, "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "torch==2.13.0"], check=True)
        pins = os.path.join(PEER_VENV, "constraints.txt")  # kept with the venv it made
        with open(pins, "w") as f:
            f.write("torch==2.13.0\n")
        subprocess.run([*pip, "-c", pins, *PEER_PACKAGES], check=True)
    return python


class StopAfter:
    """Callback: stops the run ``seconds`` after its first batch, noting each batch."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.marks: list[tuple[float, float]] = []

    def on_iteration(self, metrics: dict[str, float]) -> bool:
        self.marks.append((time.perf_counter(), metrics["env_steps"]))
        return self.marks[-1][0] - self.marks[0][0] < self.seconds


def steady_rate(marks: list[tuple[float, float]], warmup_s: float) -> float:
    """Steps per second between the first mark ``warmup_s`` after the start and the last."""
    start = marks[0][0] + warmup_s
    after = [m for m in marks if m[0] >= start] or marks[-2:]
    (t0, s0), (t1, s1) = after[0], after[-1]
    return (s1 - s0) / max(t1 - t0, 1e-9)


def rlfw_rate(seconds: float, warmup_s: float, epochs: int, minibatch: int) -> float:
    config = apply_overrides(RunConfig(algo="appo", env=ENV, seed=0), preset("appo", ENV))
    apply_overrides(
        config,
        {
            "runner": "async",
            "batch_B": N_ENVS,
            "batch_T": ROLLOUT,
            "appo": {"epochs": epochs, "minibatch_size": minibatch},
        },
    )
    config.schedule = RunSchedule(n_steps=10**9, eval_every=None, log_every=10**9)
    clock = StopAfter(seconds + warmup_s)
    with build_runner(config, None, progress=False, stdout=False, callbacks=[clock]) as runner:
        runner.train()
    return steady_rate(clock.marks, warmup_s)


def peer_rate(seconds: float, warmup_s: float, epochs: int, minibatch: int) -> float:
    python = peer_python()
    with tempfile.TemporaryDirectory() as tmp:
        launcher = os.path.join(tmp, "train_atari_ale.py")
        with open(launcher, "w") as f:
            f.write(LAUNCHER)
        command = [
            python,
            launcher,
            "--env=atari_pong",
            "--experiment=bench",
            f"--train_dir={tmp}",
            "--device=cpu",
            "--async_rl=True",
            "--num_workers=2",
            f"--num_envs_per_worker={N_ENVS // 2}",
            "--worker_num_splits=2",
            f"--rollout={ROLLOUT}",
            f"--batch_size={minibatch}",
            f"--num_batches_per_epoch={N_ENVS * ROLLOUT // minibatch}",
            f"--num_epochs={epochs}",
            "--summaries_use_frameskip=False",
            "--train_for_env_steps=1000000000",
            "--with_wandb=False",
        ]
        log_path = os.path.join(tmp, "log.txt")
        with open(log_path, "w") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
            marks = _wait_for_marks(proc, log_path, seconds + warmup_s)
            proc.send_signal(signal.SIGINT)  # Sample Factory stops cleanly on Ctrl-C
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    if len(marks) < 2:
        raise RuntimeError(f"Sample Factory reported no progress; its log: {log_path}")
    return steady_rate(marks, warmup_s)


_PROGRESS = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\].*Total num frames: (\d+)")


def _progress_marks(text: str) -> list[tuple[float, float]]:
    """(time, agent steps) of each of Sample Factory's progress lines once steps count."""
    marks = []
    for stamp, steps in _PROGRESS.findall(text):
        when = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if int(steps) > 0:
            marks.append((when, float(steps)))
    return marks


def _wait_for_marks(proc: subprocess.Popen, log_path: str, seconds: float) -> list:
    """Sample Factory's progress marks once ``seconds`` have passed since its first one."""
    while proc.poll() is None:
        time.sleep(2.0)
        marks = _progress_marks(open(log_path).read())
        if marks and marks[-1][0] - marks[0][0] >= seconds:
            return marks
    raise RuntimeError(f"Sample Factory exited with {proc.returncode}; see {log_path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=180.0, help="measured, each side")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds left out first")
    parser.add_argument("--work", choices=sorted(WORK), default="rlfw")
    args = parser.parse_args()
    epochs, minibatch = WORK[args.work]
    ours = rlfw_rate(args.seconds, args.warmup, epochs, minibatch)
    theirs = peer_rate(args.seconds, args.warmup, epochs, minibatch)
    print(
        f"APPO {ENV}, {N_ENVS} envs x {ROLLOUT} steps a batch, {epochs} epochs of "
        f"{minibatch}: rlfw async {ours:,.0f} agent steps/s, Sample Factory 2.1.1 "
        f"{theirs:,.0f}: rlfw / Sample Factory {ours / theirs:.2f}x"
    )


if __name__ == "__main__":
    main()
