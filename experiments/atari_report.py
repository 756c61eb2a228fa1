"""A finished Atari training run, made into a committed benchmark: curves, numbers and the
trained policy as a folder anyone can evaluate.

    python experiments/atari_report.py RUN_DIR [--out docs/benchmarks/atari] [--episodes 10]
        [--policy]

Writes under OUT:
- ``<name>/config.json`` and ``<name>/progress.csv`` (the run's settings and log);
- with ``--policy`` (the headline run only), ``<name>-policy/``: the policy as ``rlfw export``
  writes it (safetensors weights, config, model card), which ``rlfw eval`` plays;
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

from rlfw.launch.config import RunConfig, train_command
from rlfw.launch.evaluate import evaluate_checkpoint
from rlfw.launch.export import export_policy
from rlfw.logging.plot import figure_and_axes
from rlfw.runfolder.files import write_text

MAX_POLICY_BYTES = 10 * 2**20


def read_progress(run_dir: str) -> list[dict]:
    with open(os.path.join(run_dir, "progress.csv")) as f:
        return list(csv.DictReader(f))


def column(rows: list[dict], key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(env steps, elapsed seconds, value) where ``key`` was logged."""
    got = [
        (float(r["step"]), float(r["time/elapsed_s"]), float(r[key]))
        for r in rows
        if r.get(key) not in (None, "") and r.get("time/elapsed_s") not in (None, "")
    ]
    return tuple(np.array(c) for c in zip(*got)) if got else (np.array([]),) * 3


def keep_record(run_dir: str, dest: str) -> None:
    """The run's config.json and progress.csv into ``dest`` (its record, no weights)."""
    os.makedirs(dest, exist_ok=True)
    for name in ("config.json", "progress.csv"):
        shutil.copy(os.path.join(run_dir, name), dest)


def policy_size(folder: str) -> int:
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    if size > MAX_POLICY_BYTES:
        raise ValueError(
            f"{folder} is {size / 2**20:.1f} MiB; a committed policy folder must "
            f"stay under {MAX_POLICY_BYTES / 2**20:.0f} MiB"
        )
    return size


def plot(rows: list[dict], frame_skip: int, title: str, path: str) -> None:
    fig, axes = figure_and_axes((10, 3.8), 1, 2, sharey=True)
    for key, label, style in (
        ("eval/return_mean", "evaluation (mean of episodes)", "o-"),
        ("rollout/return_mean", "training episodes", "-"),
    ):
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
    parser.add_argument(
        "--policy",
        action="store_true",
        help="also commit the policy, exported to OUT/<name>-policy",
    )
    args = parser.parse_args()
    config = RunConfig.load(args.run_dir)
    name = args.name or os.path.basename(os.path.normpath(args.run_dir))
    rows = read_progress(args.run_dir)
    keep_record(args.run_dir, os.path.join(args.out, name))
    if args.policy:  # the headline run's policy, as `rlfw export` writes it
        policy = os.path.join(args.out, f"{name}-policy")
        returns = export_policy(
            args.run_dir, policy, config, episodes=args.episodes, gif=False
        ).returns
        kept = (
            f"Committed policy: `{policy}` ({policy_size(policy) / 2**20:.1f} MiB, "
            f"exported with `rlfw export`). `python -m rlfw eval {policy} --episodes "
            f"{args.episodes}` played it again here: "
        )
    else:
        returns = evaluate_checkpoint(args.run_dir, args.episodes, config=config)
        kept = (
            f"Its policy is not committed (only the headline run's is); at the end of "
            f"the run `python -m rlfw eval RUN --episodes {args.episodes}` played: "
        )
    frame_skip = config.atari.frame_skip
    plot(rows, frame_skip, f"{config.algo} {config.env}", os.path.join(args.out, f"{name}.png"))
    steps, seconds, evals = column(rows, "eval/return_mean")
    last = rows[-1]
    total_s = float(last["time/elapsed_s"])
    lines = [
        f"# {config.algo} {config.env}, seed {config.seed}",
        "",
        f"`{train_command(config)}` (`{name}/config.json` holds every setting).",
        "",
        f"{int(float(last['step'])):,} env steps = {int(float(last['step'])) * frame_skip:,} "
        f"frames in {total_s / 60:.1f} minutes ({float(last['step']) / total_s:,.0f} env "
        "steps/s, evaluations included).",
        "",
        f"{kept}**{returns.mean():.1f} ± {returns.std():.1f}** over {len(returns)} episodes "
        f"({'greedy' if config.schedule.eval_greedy else 'sampled'} actions, as the run "
        "evaluated).",
        "",
        f"![curves]({name}.png)",
        "",
        "| env steps | frames | minutes | evaluation return |",
        "|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {int(s):,} | {int(s) * frame_skip:,} | {t / 60:.1f} | {v:.1f} |"
        for s, t, v in zip(steps, seconds, evals)
    ]
    write_text(os.path.join(args.out, f"{name}.md"), "\n".join(lines) + "\n")
    print(f"atari report: {os.path.join(args.out, name + '.md')}; eval {returns.mean():.1f}")


if __name__ == "__main__":
    main()
