"""A finished Atari training run, made into a committed benchmark: curves, numbers and the
trained policy as a small run folder anyone can evaluate.

    python experiments/atari_report.py RUN_DIR [--out docs/benchmarks/atari] [--episodes 10]

Writes under OUT:
- ``<name>/config.json`` and ``<name>/checkpoints/ckpt_<step>.pt`` holding only the agent's
  weights (what ``rlfw eval`` reads; the optimizer, sampler and env state stay behind), so
  ``rlfw eval OUT/<name>`` plays the trained policy;
- ``<name>/progress.csv`` (the run's log, for the record);
- ``<name>.png``: evaluation and training returns against frames and against minutes;
- ``<name>.md``: the command, env steps, frames, wall-clock, every evaluation, and a fresh
  evaluation of the committed policy (``--episodes``, as the run evaluated).
A run folder under /tmp or anywhere else stays untouched.
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil

import numpy as np

from rlfw.launch.config import RunConfig, changed_from_preset, set_argument
from rlfw.launch.evaluate import evaluate_checkpoint
from rlfw.logging.plot import figure_and_axes
from rlfw.runfolder.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from rlfw.runfolder.files import write_text

MAX_POLICY_BYTES = 10 * 2**20


def read_progress(run_dir: str) -> list[dict]:
    with open(os.path.join(run_dir, "progress.csv")) as f:
        return list(csv.DictReader(f))


def column(rows: list[dict], key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(env steps, elapsed seconds, value) where ``key`` was logged."""
    got = [(float(r["step"]), float(r["time/elapsed_s"]), float(r[key])) for r in rows
           if r.get(key) not in (None, "") and r.get("time/elapsed_s") not in (None, "")]
    return tuple(np.array(c) for c in zip(*got)) if got else (np.array([]),) * 3


def export_policy(run_dir: str, dest: str) -> tuple[str, int]:
    """config.json and a checkpoint with only the agent into ``dest``: (path, bytes)."""
    path = latest_checkpoint(run_dir)
    state = load_checkpoint(path, pickles="drop")  # env state is not needed to evaluate
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    shutil.copy(os.path.join(run_dir, "config.json"), dest)
    shutil.copy(os.path.join(run_dir, "progress.csv"), dest)
    step = int(os.path.basename(path).split("_")[1].split(".")[0])
    out = save_checkpoint(dest, step, {"agent": state["agent"]}, keep=1)
    size = os.path.getsize(out)
    if size > MAX_POLICY_BYTES:
        raise ValueError(f"{out} is {size / 2**20:.1f} MiB; the committed policy must stay "
                         f"under {MAX_POLICY_BYTES / 2**20:.0f} MiB")
    return out, size


def plot(rows: list[dict], frame_skip: int, title: str, path: str) -> None:
    fig, axes = figure_and_axes((10, 3.8), 1, 2, sharey=True)
    for key, label, style in (("eval/return_mean", "evaluation (mean of episodes)", "o-"),
                              ("rollout/return_mean", "training episodes", "-")):
        steps, seconds, value = column(rows, key)
        if len(value):
            axes[0].plot(steps * frame_skip / 1e6, value, style, label=label, markersize=3)
            axes[1].plot(seconds / 60, value, style, label=label, markersize=3)
    axes[0].set(xlabel="frames (millions)", ylabel="episode return", title=title)
    axes[1].set(xlabel="minutes", title=title)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--out", default=os.path.join("docs", "benchmarks", "atari"))
    parser.add_argument("--name", help="default: the run folder's name")
    parser.add_argument("--episodes", type=int, default=10)
    args = parser.parse_args()
    config = RunConfig.load(args.run_dir)
    name = args.name or os.path.basename(os.path.normpath(args.run_dir))
    rows = read_progress(args.run_dir)
    dest = os.path.join(args.out, name)
    policy, size = export_policy(args.run_dir, dest)
    returns = evaluate_checkpoint(dest, args.episodes)
    frame_skip = config.atari.frame_skip
    plot(rows, frame_skip, f"{config.algo} {config.env}", os.path.join(args.out, f"{name}.png"))
    steps, seconds, evals = column(rows, "eval/return_mean")
    last = rows[-1]
    changes = "".join(f" --set {set_argument(key, value)}"
                      for key, value in changed_from_preset(config).items())
    total_s = float(last["time/elapsed_s"])
    lines = [
        f"# {config.algo} {config.env}, seed {config.seed}", "",
        f"`rlfw train --algo {config.algo} --env {config.env} --sampler {config.sampler} "
        f"--runner {config.runner} --steps {config.schedule.n_steps} --seed {config.seed}"
        f"{changes}` (`{name}/config.json` holds every setting).", "",
        f"{int(float(last['step'])):,} env steps = {int(float(last['step'])) * frame_skip:,} "
        f"frames in {total_s / 60:.1f} minutes ({float(last['step']) / total_s:,.0f} env "
        "steps/s, evaluations included).", "",
        f"Committed policy: `{policy}` ({size / 2**20:.1f} MiB, the agent only). "
        f"`python -m rlfw eval {dest} --episodes {args.episodes}` played it again here: "
        f"**{returns.mean():.1f} ± {returns.std():.1f}** over {len(returns)} episodes "
        f"({'greedy' if config.schedule.eval_greedy else 'sampled'} actions, as the run "
        "evaluated).", "",
        f"![curves]({name}.png)", "",
        "| env steps | frames | minutes | evaluation return |", "|---:|---:|---:|---:|"]
    lines += [f"| {int(s):,} | {int(s) * frame_skip:,} | {t / 60:.1f} | {v:.1f} |"
              for s, t, v in zip(steps, seconds, evals)]
    write_text(os.path.join(args.out, f"{name}.md"), "\n".join(lines) + "\n")
    print(f"atari report: {os.path.join(args.out, name + '.md')}; eval {returns.mean():.1f}")


if __name__ == "__main__":
    main()
