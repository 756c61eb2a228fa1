"""Does bf16 autocast bring MinAtar PPO to half of SB3's time, and at what cost in return?

The MinAtar suite's time goal is rlfw <= 0.5x SB3's seconds; in float32 rlfw's PPO runs take
0.74-0.95x, most of it the learner's minibatch updates (the same FLOPs as SB3's,
``experiments/bench/minatar_time_split.py``). PPO's ``amp="bf16"`` runs the forward and the
loss under bfloat16 autocast (the Atari preset's setting). This runs, for one game at the
suite's budget (2M steps) and seeds 0-2: rlfw's preset in float32, the same with
``ppo.amp=bf16``, and SB3 with rlfw's settings and network, all as the suite's jobs (their
own process, one core, one torch thread, two at a time, interleaved so that each pair
shares the machine alike), and prints per-seed finals and seconds, then each variant's
median final and mean seconds over SB3's (``rlfw.bench.report.summarize``: runs that
waited for a CPU are left out of the seconds, as in the suite's report).

Its run folders and records go to ``--out`` (default under /tmp, never docs/: the suite's
records there stay the suite's). Re-running skips finished runs. On a CPU without bf16
units (no AVX512-BF16 / AMX) autocast is slower, not faster.

    python experiments/bench/minatar_bf16.py [--game Breakout] [--out /tmp/minatar-bf16]
"""

from __future__ import annotations

import argparse
import functools

from rlfw.bench.report import summarize
from rlfw.bench.run import Job, run_job
from rlfw.bench.suites import MINATAR_BUDGET
from rlfw.launch.backends import LocalBackend

BF16 = (("ppo.amp", "bf16"),)


def jobs(env: str, seeds: list[int]) -> list[Job]:
    """Per seed: bf16, SB3, float32, in that order (two run at once: each kind meets each
    other kind as its neighbour)."""
    out = []
    for seed in seeds:
        out += [
            Job("rlfw", "ppo", env, MINATAR_BUDGET["ppo"], seed, settings=BF16, label="bf16"),
            Job("sb3", "ppo", env, MINATAR_BUDGET["ppo"], seed, peer_settings="same"),
            Job("rlfw", "ppo", env, MINATAR_BUDGET["ppo"], seed),
        ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--game", default="Breakout")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default="/tmp/minatar-bf16")
    parser.add_argument("--max-parallel", type=int, default=2)
    args = parser.parse_args()
    env = f"MinAtar/{args.game}-v1"

    def name(r: dict) -> str:
        return f"{r['framework']}{'-' + r['label'] if r.get('label') else ''}"

    def report(r: dict) -> None:
        print(
            f"{name(r)} seed {r['seed']}: final {r.get('final_return')}, "
            f"{r.get('wall_s', 0):.0f} s, run-queue wait {r.get('wait_share', 0):.1%}",
            flush=True,
        )

    results = LocalBackend(args.max_parallel).map(
        functools.partial(run_job, out_dir=args.out), [(j,) for j in jobs(env, args.seeds)], report
    )
    by_kind: dict[str, list[dict]] = {}
    for r in results:
        by_kind.setdefault(name(r), []).append(r)
    summaries = {kind: summarize(runs) for kind, runs in by_kind.items()}
    sb3_s = summaries["sb3"].get("wall_s")
    print(f"\nppo {env}, {MINATAR_BUDGET['ppo']:,} steps, seeds {args.seeds}")
    for kind, summary in summaries.items():
        if "finals" not in summary:
            print(f"{kind:10s} no finished run: {summary['failed'] or summary['not_run']}")
            continue
        wall = summary["wall_s"]
        ratio = f"{wall / sb3_s:.2f}x" if wall and sb3_s else "n/a (every run loaded)"
        print(
            f"{kind:10s} finals {', '.join(f'{f:.1f}' for f in summary['finals'])}  "
            f"median {summary['median']:.1f}  {wall or 0:.0f} s  / SB3 {ratio}"
        )


if __name__ == "__main__":
    main()
