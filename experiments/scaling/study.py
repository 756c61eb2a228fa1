"""The scaling study of *Accelerated Methods for Deep RL* (Stooke & Abbeel 2018), in three
parts, at three sizes. Writes markdown tables, PNG plots and the raw numbers to --out.

    python experiments/scaling/study.py --scale smoke   # about 2 min: the test runs it
    python experiments/scaling/study.py --scale small   # this 2-core machine, < 30 min
    python experiments/scaling/study.py --scale dgx     # the paper's sizes, an 8-GPU box
    python experiments/scaling/study.py --scale dgx --dry-run   # print the plan only

(a) samplers: env steps/s of every sampler kind vs envs and workers, stepping the run's
    real model (its inference is part of the cost, as in the paper);
(b) batch size (the dgx plan; at the smoke and small sizes this claim runs on MinAtar with
    seeds and CIs: experiments/scaling/claims.py): PPO, A2C and DQN with the batch x1, x2,
    x4, x8 (more parallel envs; DQN also a k-times larger minibatch at a k-times lower
    replay ratio, so each env step is replayed as often), the learning rate raised with the
    batch (x sqrt(k) by default, --lr-scaling), env steps and wall-clock until an
    evaluation reaches the threshold;
(c) learners: torchrun with 1, 2, ... ranks: the same global batch split over the ranks
    (time to threshold) and a fixed batch per rank (weak scaling: steps/s and efficiency
    = rate(n) / (n x rate(1))).

Every training run is a separate `rlfw train` process (part (b) through rlfw's sweep
machinery, one at a time so wall-clocks do not disturb each other), its run folder kept
under --runs-dir.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace

from rlfw.envs import EnvSpaces, is_atari
from rlfw.launch.backends import LocalBackend
from rlfw.launch.build import build_agent, build_sampler
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.launch.sweep import Sweep, Variant
from rlfw.logging.plot import figure_and_axes
from rlfw.samplers.machinery.throughput import measure_steps_per_second


@dataclass(frozen=True)
class SamplerPart:
    env: str
    kinds: tuple[str, ...]
    envs: tuple[int, ...]
    workers: tuple[int, ...]
    batch_T: int
    seconds: float


@dataclass(frozen=True)
class BatchPart:
    env: str
    algos: tuple[str, ...]
    factors: tuple[int, ...]
    threshold: float
    max_steps: dict  # per algo: give up after this many env steps
    eval_every: int
    eval_episodes: int = 10


@dataclass(frozen=True)
class RankPart:
    ranks: tuple[int, ...]
    env: str  # strong scaling: time to threshold, global batch fixed
    threshold: float
    max_steps: int
    eval_every: int
    throughput_env: str  # weak scaling: steps/s with a fixed batch per rank
    throughput_steps: int
    throughput_sampler: str = "serial"
    device: str = "cpu"
    # weak scaling with a fixed core share: n ranks on n cores, one each (sampler workers
    # and learner threads inside it), against 1 rank on 1 core
    fixed_share_envs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scale:
    sampler: SamplerPart
    batch: BatchPart | None  # None: this size's batch claim runs on MinAtar (claims.py)
    ranks: RankPart


SCALES = {
    "smoke": Scale(
        SamplerPart("CartPole-v1", ("serial", "cpu", "queue"), (8,), (1, 2), 16, 0.2),
        None,
        RankPart(
            (1, 2),
            "CartPole-v1",
            threshold=60.0,
            max_steps=8_192,
            eval_every=2_048,
            throughput_env="CartPole-v1",
            throughput_steps=2_048,
            fixed_share_envs=("CartPole-v1",),
        ),
    ),
    "small": Scale(
        SamplerPart(
            "ALE/Pong-v5",
            ("serial", "cpu", "gpu", "alternating", "queue", "native"),
            (8, 16, 32),
            (1, 2),
            32,
            3.0,
        ),
        None,
        RankPart(
            (1, 2),
            "CartPole-v1",
            threshold=475.0,
            max_steps=160_000,
            eval_every=8_192,
            throughput_env="ALE/Pong-v5",
            throughput_steps=8_192,
            throughput_sampler="cpu",
            fixed_share_envs=("CartPole-v1", "ALE/Pong-v5"),
        ),
    ),
    # The paper's DGX-1 sizes: hundreds of Atari envs, batches far above the usual, one
    # learner per GPU. Run it on an 8-GPU machine (NCCL); it is planned, not run, here.
    "dgx": Scale(
        SamplerPart(
            "ALE/Pong-v5",
            ("cpu", "gpu", "alternating", "queue", "native"),
            (64, 128, 256, 512),
            (8, 16, 32, 40),
            64,
            10.0,
        ),
        BatchPart(
            "ALE/Pong-v5",
            ("ppo", "a2c", "dqn"),
            (1, 2, 4, 8),
            threshold=18.0,
            max_steps={"ppo": 10_000_000, "a2c": 20_000_000, "dqn": 10_000_000},
            eval_every=250_000,
        ),
        RankPart(
            (1, 2, 4, 8),
            "ALE/Pong-v5",
            threshold=18.0,
            max_steps=10_000_000,
            eval_every=250_000,
            throughput_env="ALE/Pong-v5",
            throughput_steps=1_000_000,
            throughput_sampler="gpu",
            device="cuda",
        ),
    ),
}


# -- (a) samplers ------------------------------------------------------------------------
def sampler_cases(part: SamplerPart) -> list[dict]:
    cases = []
    for kind in part.kinds:
        if kind == "native" and not is_atari(part.env):
            continue
        for n_envs in part.envs:
            for workers in (1,) if kind == "serial" else part.workers:
                if workers > n_envs or (kind == "alternating" and workers % 2):
                    continue
                cases.append({"sampler": kind, "envs": n_envs, "workers": workers})
    return cases


def run_sampler_part(part: SamplerPart, say) -> list[dict]:
    rows = []
    for case in sampler_cases(part):
        algo = "ppo"
        config = apply_overrides(RunConfig(algo=algo, env=part.env), preset(algo, part.env))
        config = replace(
            config,
            sampler=case["sampler"],
            batch_B=case["envs"],
            batch_T=part.batch_T,
            n_workers=case["workers"],
        )
        config.validate()
        factory = config.env_factory()
        agent = build_agent(config, EnvSpaces.of(factory))
        rate = measure_steps_per_second(build_sampler(config, factory), agent, part.seconds)
        rows.append({**case, "steps_per_s": rate})
        say(
            f"(a) {case['sampler']:<11} {case['envs']:>4} envs {case['workers']:>3} "
            f"workers: {rate:,.0f} env steps/s"
        )
    return rows


# -- (b) batch size ----------------------------------------------------------------------
def lr_factor(k: int, scaling: str) -> float:
    return {"sqrt": math.sqrt(k), "linear": float(k), "none": 1.0}[scaling]


def batch_variants(part: BatchPart, scaling: str, seed: int) -> list[tuple[str, int, Variant]]:
    out = []
    for algo in part.algos:
        base = apply_overrides(RunConfig(algo=algo, env=part.env), preset(algo, part.env))
        group = base.algo_config()
        for k in part.factors:
            settings = [
                ("batch_B", str(base.batch_B * k)),
                (f"{algo}.learning_rate", repr(group.learning_rate * lr_factor(k, scaling))),
            ]
            if algo == "ppo":  # the same number of minibatches per epoch
                settings.append(("ppo.minibatch_size", str(group.minibatch_size * k)))
            if algo == "dqn":
                settings += [
                    ("dqn.batch_size", str(group.batch_size * k)),
                    ("dqn.replay_ratio", repr(group.replay_ratio / k)),
                ]
            out.append((algo, k, Variant(tuple(settings), seed)))
    return out


def reached(run_dir: str, threshold: float) -> tuple[int | None, float | None, float | None]:
    """(env steps, seconds) of the first evaluation at or above ``threshold``, and the
    final evaluation."""
    path = os.path.join(run_dir, "progress.csv")
    if not os.path.exists(path):
        return None, None, None
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("eval/return_mean")]
    final = float(rows[-1]["eval/return_mean"]) if rows else None
    for r in rows:
        if float(r["eval/return_mean"]) >= threshold:
            return int(float(r["step"])), float(r["time/elapsed_s"]), final
    return None, None, final


def run_batch_part(part: BatchPart, scaling: str, seed: int, runs_dir: str, say) -> list[dict]:
    rows = []
    for algo, k, variant in batch_variants(part, scaling, seed):
        flags = [
            "--algo",
            algo,
            "--env",
            part.env,
            "--steps",
            str(part.max_steps[algo]),
            "--eval-every",
            str(part.eval_every),
            "--eval-episodes",
            str(part.eval_episodes),
            "--stop-at-return",
            str(part.threshold),
        ]
        settings = dict(variant.settings)
        algo_dir = os.path.join(runs_dir, algo)  # the preset of --algo applies first
        (outcome,) = Sweep(algo_dir, [variant], flags).run(LocalBackend(1))
        steps, seconds, final = reached(os.path.join(algo_dir, variant.name), part.threshold)
        rows.append(
            {
                "algo": algo,
                "factor": k,
                "batch_B": int(settings["batch_B"]),
                "learning_rate": float(settings[f"{algo}.learning_rate"]),
                "status": outcome.status,
                "steps_to_threshold": steps,
                "seconds_to_threshold": seconds,
                "final_eval": final,
                "steps_per_s": outcome.steps_per_s,
            }
        )
        say(f"(b) {algo} x{k}: {_fmt_reach(steps, seconds)} ({outcome.status})")
    return rows


def _fmt_reach(steps, seconds) -> str:
    if steps is None:
        return "threshold not reached"
    return f"threshold at {steps:,} env steps, {seconds:.0f} s"


# -- (c) learner ranks -------------------------------------------------------------------
def torchrun(
    n: int, run_dir: str, flags: list[str], log: str, cores: list[int] | None = None
) -> int:
    """``rlfw train`` on ``n`` torchrun ranks; with ``cores``, the launch is pinned to them
    (rlfw's affinity plan then splits them between the ranks)."""
    # torchrun's own log folder beside the run: by default it makes one in the system's
    # temp dir per launch and never removes it
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={n}",
        "--log-dir",
        run_dir + ".torchrun",
        "-m",
        "rlfw",
        "train",
        "--log-dir",
        run_dir,
        "--no-progress",
        *flags,
    ]
    pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
    with open(log, "w") as f:
        return subprocess.call(argv, stdout=f, stderr=subprocess.STDOUT, preexec_fn=pin)


def mean_rate(run_dir: str) -> float | None:
    path = os.path.join(run_dir, "progress.csv")
    if not os.path.exists(path):
        return None
    with open(path, newline="") as f:
        rates = [
            float(r["time/steps_per_second"])
            for r in csv.DictReader(f)
            if r.get("time/steps_per_second")
        ]
    if len(rates) > 1:
        rates = rates[1:]  # the first interval carries start-up
    return sum(rates) / len(rates) if rates else None


def run_rank_part(part: RankPart, seed: int, runs_dir: str, say) -> list[dict]:
    os.makedirs(runs_dir, exist_ok=True)
    rows = []
    base = apply_overrides(RunConfig(algo="ppo", env=part.env), preset("ppo", part.env))
    for n in part.ranks:
        if base.batch_B % n or base.ppo.minibatch_size % n:
            continue
        run_dir = os.path.join(runs_dir, f"strong-ranks={n}")
        flags = [
            "--env",
            part.env,
            "--steps",
            str(part.max_steps),
            "--seed",
            str(seed),
            "--batch-B",
            str(base.batch_B // n),
            "--device",
            part.device,
            "--set",
            f"ppo.minibatch_size={base.ppo.minibatch_size // n}",
            "--eval-every",
            str(part.eval_every),
            "--stop-at-return",
            str(part.threshold),
        ]
        code = _once(run_dir, lambda: torchrun(n, run_dir, flags, run_dir + ".log"))
        steps, seconds, final = reached(run_dir, part.threshold)
        rows.append(
            {
                "kind": "strong",
                "ranks": n,
                "env": part.env,
                "status": code,
                "global_batch_B": base.batch_B,
                "steps_to_threshold": steps,
                "seconds_to_threshold": seconds,
                "final_eval": final,
                "steps_per_s": mean_rate(run_dir),
            }
        )
        say(f"(c) strong, {n} rank(s): {_fmt_reach(steps, seconds)}")
    tbase = apply_overrides(
        RunConfig(algo="ppo", env=part.throughput_env), preset("ppo", part.throughput_env)
    )
    for n in part.ranks:
        run_dir = os.path.join(runs_dir, f"weak-ranks={n}")
        steps = part.throughput_steps * n
        flags = [
            "--env",
            part.throughput_env,
            "--steps",
            str(steps),
            "--seed",
            str(seed),
            "--sampler",
            part.throughput_sampler,
            "--device",
            part.device,
            "--set",
            "schedule.eval_every=None",
            "--set",
            f"schedule.log_every={max(steps // 8, 1)}",
        ]
        code = _once(run_dir, lambda: torchrun(n, run_dir, flags, run_dir + ".log"))
        rows.append(
            {
                "kind": "weak",
                "ranks": n,
                "env": part.throughput_env,
                "status": code,
                "batch_B_per_rank": tbase.batch_B,
                "steps_per_s": mean_rate(run_dir),
            }
        )
        say(f"(c) weak, {n} rank(s): {rows[-1]['steps_per_s'] or 0:,.0f} env steps/s")
    one = next((r["steps_per_s"] for r in rows if r["kind"] == "weak" and r["ranks"] == 1), None)
    for r in rows:
        if r["kind"] == "weak" and one and r["steps_per_s"]:
            r["efficiency"] = r["steps_per_s"] / (r["ranks"] * one)
    rows += run_fixed_share(part, seed, runs_dir, say)
    return rows


def run_fixed_share(part: RankPart, seed: int, runs_dir: str, say) -> list[dict]:
    """Weak scaling that measures the framework, not the machine: n ranks pinned to n cores
    (one each: every rank's sampler workers and learner threads share its core) against one
    rank pinned to one core, the same batch per rank; efficiency = rate(n) / (n x rate(1))."""
    usable = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    os.makedirs(runs_dir, exist_ok=True)
    rows = []
    for env in part.fixed_share_envs:
        base = apply_overrides(RunConfig(algo="ppo", env=env), preset("ppo", env))
        for n in part.ranks:
            if n > len(usable):
                say(f"(c) fixed share, {n} ranks: skipped, {len(usable)} usable core(s)")
                continue
            run_dir = os.path.join(runs_dir, f"weak-1core-{env.replace('/', '_')}-ranks={n}")
            steps = part.throughput_steps * n
            flags = [
                "--env",
                env,
                "--steps",
                str(steps),
                "--seed",
                str(seed),
                "--sampler",
                part.throughput_sampler,
                "--device",
                part.device,
                "--pin-cpus",
                "--set",
                "schedule.eval_every=None",
                "--set",
                f"schedule.log_every={max(steps // 8, 1)}",
            ]
            code = _once(run_dir, lambda: torchrun(n, run_dir, flags, run_dir + ".log", usable[:n]))
            rows.append(
                {
                    "kind": "weak, 1 core per rank",
                    "ranks": n,
                    "env": env,
                    "status": code,
                    "batch_B_per_rank": base.batch_B,
                    "steps_per_s": mean_rate(run_dir),
                }
            )
            say(
                f"(c) weak, 1 core per rank, {env}, {n} rank(s): "
                f"{rows[-1]['steps_per_s'] or 0:,.0f} env steps/s"
            )
        one = next((r["steps_per_s"] for r in rows if r["env"] == env and r["ranks"] == 1), None)
        for r in rows:
            if r["env"] == env and one and r["steps_per_s"]:
                r["efficiency"] = r["steps_per_s"] / (r["ranks"] * one)
    return rows


def _once(run_dir: str, launch) -> int:
    """Run ``launch`` unless ``run_dir`` holds a finished run already (re-runs skip it)."""
    marker = os.path.join(run_dir, "study-done.json")
    if os.path.exists(marker):
        with open(marker) as f:
            return json.load(f)["returncode"]
    code = launch()
    if code == 0:
        with open(marker, "w") as f:
            json.dump({"returncode": code}, f)
    return code


# -- report ------------------------------------------------------------------------------
def _cell(value, spec: str = "") -> str:
    return "–" if value is None else format(value, spec)


def tables(scale: str, results: dict) -> str:
    out = [
        f"# Scaling study, scale `{scale}`",
        "",
        f"Written by `python experiments/scaling/study.py --scale {scale}` on "
        f"{results['machine']}; {results['wall_s']:.0f} s in all.",
        "",
    ]
    if results.get("sampler"):
        out += [
            "## (a) Sampler throughput",
            "",
            f"{results['env_a']}, the run's real model, T={results['T_a']}. "
            "![samplers](sampler_scaling.png)",
            "",
            "| sampler | envs | workers | env steps/s |",
            "|---|---:|---:|---:|",
        ]
        out += [
            f"| {r['sampler']} | {r['envs']} | {r['workers']} | {r['steps_per_s']:,.0f} |"
            for r in results["sampler"]
        ]
        out.append("")
    if results.get("batch"):
        out += [
            "## (b) Batch size",
            "",
            f"{results['env_b']}: threshold {results['threshold_b']}, learning rate x "
            f"{results['lr_scaling']}(k). ![batch](batch_scaling.png)",
            "",
            "| algo | batch x | envs | learning rate | env steps to threshold | "
            "seconds to threshold | final eval | env steps/s |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        out += [
            f"| {r['algo']} | {r['factor']} | {r['batch_B']} | {r['learning_rate']:.3g} | "
            f"{_cell(r['steps_to_threshold'], ',d')} | "
            f"{_cell(r['seconds_to_threshold'], '.0f')} | {_cell(r['final_eval'], '.1f')} | "
            f"{_cell(r['steps_per_s'], ',.0f')} |"
            for r in results["batch"]
        ]
        out.append("")
    if results.get("ranks"):
        out += [
            "## (c) Learner ranks (torchrun)",
            "",
            "![ranks](rank_scaling.png)",
            "",
            "Rows `weak` launch n ranks on the whole machine: one rank already uses "
            "every core, so on a small machine they measure the machine more than the "
            "framework. Rows `weak, 1 core per rank` give each rank a fixed share (the "
            "launch pinned to n cores, rlfw's affinity plan giving each rank one, its "
            "sampler workers and learner threads inside it): efficiency = rate(n) / "
            "(n x rate(1)) there measures what the ranks cost each other.",
            "",
            "| scaling | env | ranks | env steps to threshold | seconds to threshold | "
            "final eval | env steps/s | efficiency |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        out += [
            f"| {r['kind']} | {r['env']} | {r['ranks']} | "
            f"{_cell(r.get('steps_to_threshold'), ',d')} | "
            f"{_cell(r.get('seconds_to_threshold'), '.0f')} | "
            f"{_cell(r.get('final_eval'), '.1f')} | {_cell(r.get('steps_per_s'), ',.0f')} | "
            f"{_cell(r.get('efficiency'), '.2f')} |"
            for r in results["ranks"]
        ]
        out.append("")
    return "\n".join(out)


def plots(results: dict, out_dir: str) -> list[str]:
    written = []
    if results.get("sampler"):
        fig, ax = figure_and_axes((6, 4))
        for kind in dict.fromkeys(r["sampler"] for r in results["sampler"]):
            for w in sorted({r["workers"] for r in results["sampler"] if r["sampler"] == kind}):
                pts = [
                    (r["envs"], r["steps_per_s"])
                    for r in results["sampler"]
                    if r["sampler"] == kind and r["workers"] == w
                ]
                ax.plot(*zip(*pts), marker="o", label=f"{kind}, {w} w")
        ax.set(xlabel="envs", ylabel="env steps/s", title="(a) sampler throughput")
        ax.legend(fontsize=7)
        written.append(_save(fig, out_dir, "sampler_scaling.png"))
    if results.get("batch"):
        fig, axes = figure_and_axes((9, 4), 1, 2)
        for algo in dict.fromkeys(r["algo"] for r in results["batch"]):
            mine = [r for r in results["batch"] if r["algo"] == algo]
            for ax, key in zip(axes, ("steps_to_threshold", "seconds_to_threshold")):
                pts = [(r["factor"], r[key]) for r in mine if r[key] is not None]
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=algo)
        factors = sorted({r["factor"] for r in results["batch"]})
        for ax, label in zip(axes, ("env steps to threshold", "seconds to threshold")):
            ax.set_xscale("log", base=2)
            ax.set_xticks(factors, [f"x{k}" for k in factors])
            ax.set(xlabel="batch", ylabel=label)
        axes[0].legend()
        fig.suptitle("(b) batch-size scaling")
        written.append(_save(fig, out_dir, "batch_scaling.png"))
    if results.get("ranks"):
        fig, axes = figure_and_axes((9, 4), 1, 2)
        weak = [r for r in results["ranks"] if r["kind"] == "weak" and r["steps_per_s"]]
        strong = [
            r
            for r in results["ranks"]
            if r["kind"] == "strong" and r["seconds_to_threshold"] is not None
        ]
        if weak:
            axes[0].plot(
                [r["ranks"] for r in weak], [r["steps_per_s"] for r in weak], "o-", label="measured"
            )
            axes[0].plot(
                [r["ranks"] for r in weak],
                [r["ranks"] * weak[0]["steps_per_s"] for r in weak],
                "--",
                label="linear",
            )
            axes[0].legend()
        axes[0].set(xlabel="ranks", ylabel="env steps/s", title="weak scaling")
        if strong:
            axes[1].plot(
                [r["ranks"] for r in strong], [r["seconds_to_threshold"] for r in strong], "o-"
            )
        axes[1].set(xlabel="ranks", ylabel="seconds to threshold", title="strong scaling")
        fig.suptitle("(c) learner ranks")
        written.append(_save(fig, out_dir, "rank_scaling.png"))
    return written


def _save(fig, out_dir: str, name: str) -> str:
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return path


def machine_line() -> str:
    import psutil
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return (
        f"{psutil.cpu_count(logical=False)} physical / {psutil.cpu_count()} logical "
        f"cores, {gpus} GPU(s), torch {torch.__version__}"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=tuple(SCALES), default="smoke")
    parser.add_argument("--out", help="tables and plots (default docs/scaling/<scale>)")
    parser.add_argument("--runs-dir", help="training runs (default runs/scaling-<scale>)")
    parser.add_argument("--parts", default="abc", help="which parts to run (default abc)")
    parser.add_argument("--lr-scaling", choices=("sqrt", "linear", "none"), default="sqrt")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite the tables and plots from --out's results.json",
    )
    args = parser.parse_args(argv)
    if set(args.parts) - set("abc") or not args.parts:
        parser.error(f"--parts takes letters of 'abc', got {args.parts!r}")
    scale = SCALES[args.scale]
    out_dir = args.out or os.path.join("docs", "scaling", args.scale)
    runs_dir = args.runs_dir or os.path.join("runs", f"scaling-{args.scale}")
    if args.dry_run:
        print(json.dumps(asdict(scale), indent=2))
        runs_b = len(batch_variants(scale.batch, args.lr_scaling, args.seed)) if scale.batch else 0
        print(
            f"(a) {len(sampler_cases(scale.sampler))} sampler cases; (b) {runs_b} "
            f"training runs; (c) {2 * len(scale.ranks.ranks)} torchrun launches"
        )
        return 0
    os.makedirs(out_dir, exist_ok=True)
    if args.report_only:
        with open(os.path.join(out_dir, "results.json")) as f:
            return report(args.scale, json.load(f), out_dir, print)
    started = time.perf_counter()
    results: dict = {"scale": args.scale, "machine": machine_line(), "lr_scaling": args.lr_scaling}
    previous = os.path.join(out_dir, "results.json")
    if set(args.parts) != set("abc") and os.path.exists(previous):
        with open(previous) as f:  # re-running some parts keeps the others' results
            kept = json.load(f)
        if kept.get("scale") == args.scale:
            results = {**kept, **results, "wall_s_before": kept.get("wall_s", 0.0)}

    def say(line: str) -> None:
        print(f"scaling[{args.scale}] {line}", flush=True)

    before = results.pop("wall_s_before", 0.0)

    def save() -> None:  # after every part: an interrupted study keeps what it measured
        results["wall_s"] = time.perf_counter() - started + before
        with open(previous, "w") as f:
            json.dump(results, f, indent=2)

    if "a" in args.parts:
        results.update(
            env_a=scale.sampler.env,
            T_a=scale.sampler.batch_T,
            sampler=run_sampler_part(scale.sampler, say),
        )
        save()
    if "b" in args.parts and scale.batch is None:
        say(
            f"(b) at scale {args.scale}: the batch-size claim runs on MinAtar, with seeds "
            f"and CIs: python experiments/scaling/claims.py --part batch --scale "
            f"{args.scale}"
        )
    elif "b" in args.parts:
        results.update(
            env_b=scale.batch.env,
            threshold_b=scale.batch.threshold,
            batch=run_batch_part(
                scale.batch, args.lr_scaling, args.seed, os.path.join(runs_dir, "batch"), say
            ),
        )
        save()
    if "c" in args.parts:
        results["ranks"] = run_rank_part(
            scale.ranks, args.seed, os.path.join(runs_dir, "ranks"), say
        )
    save()
    return report(args.scale, results, out_dir, say)


def report(scale: str, results: dict, out_dir: str, say) -> int:
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(tables(scale, results))
    for path in plots(results, out_dir):
        say(f"wrote {path}")
    say(f"wrote {os.path.join(out_dir, 'README.md')} ({results['wall_s']:.0f} s of runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
