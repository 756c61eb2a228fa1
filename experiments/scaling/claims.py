"""The seed papers' claims on MinAtar, several seeds each, with confidence intervals.

    python experiments/scaling/claims.py --part batch --scale small    # docs/scaling/small/
    python experiments/scaling/claims.py --part runners --scale small
    python experiments/scaling/claims.py --part runners --scale lag   # docs/scaling/lag/
    python experiments/scaling/claims.py --part batch --scale smoke --out /tmp/claims
    python experiments/scaling/claims.py --part batch --report-only    # rebuild from records
    python experiments/scaling/claims.py --part batch --algos ppo,a2c  # DQN's runs later

batch (Stooke & Abbeel 2018: larger batches do not cost sample efficiency): PPO and A2C with
the env count x1, x2, x4, x8; DQN with its minibatch x1..x8 at a k-times lower replay ratio
(each env step replayed as often: the paper kept the training intensity fixed). The learning
rate grows with the batch as sqrt(k) (rlfw's rule; the paper scaled it up with the batch and
tuned it per size). For each size: curves of training return against env steps and against
seconds (IQM over seeds with a 95% bootstrap band), and env steps and seconds until the
curve first reaches 80% of the x1 runs' final training return (their curves' mean over the
last twentieth of the steps), with a 95% bootstrap CI.

runners (HTS-RL: concurrent learning keeps sync's sample efficiency; stale asynchronous
policies lose some): sync, concurrent and async runners for PPO and A2C at equal env steps
(async at its default lead, one update stale like concurrent, and with a lead of 4, three
updates stale), final evaluation IQM with CIs, curves against steps and seconds, and each
one's measured policy lag. At the lag scale (GA3C, IMPALA: does a stale policy hurt, and
does V-trace correct it?): PPO as it is, APPO and IMPALA (V-trace) under the async runner
at leads 1, 2, 4, 8 and 16 (policy lag 0 to 15 updates; lead 2 is also the concurrent
runner's run, the same bits).

Every run is an `rlfw.bench.job` child process with one torch thread, at most two at once
(one core each); each finished run leaves a small record under OUT/records/ that is
committed, so a study continues on another machine and `--report-only` rebuilds from them.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import warnings
from dataclasses import dataclass

import numpy as np

from rlfw.bench.clock import quietly_timed, timed_under_load
from rlfw.bench.report import SETTINGS_FIELD, binned, bootstrap_band, iqm_with_ci
from rlfw.bench.run import Job, finished, run_job
from rlfw.launch.backends import LocalBackend
from rlfw.launch.config import RunConfig, set_field
from rlfw.logging.plot import figure_and_axes
from rlfw.runfolder.files import write_json, write_text

TARGET_FRACTION = 0.8  # of the x1 runs' final training return


# The runner part's variants: label -> settings. The async runner's default lead of 2 gives
# the same fixed lag of one update as the concurrent runner (and, by construction, the same
# run); a lead of 4 gives three updates of staleness, the asynchronous case HTS-RL argues
# against.
RUNNER_VARIANTS = {
    "sync": (("runner", "sync"),),
    "concurrent": (("runner", "concurrent"),),
    "async": (("runner", "async"),),
    "async-lag3": (("runner", "async"), ("async_lead", "4")),
    # the lag study (issue 72): the async runner's lead k samples each batch with weights
    # k - 1 updates old; lead 1 is sync's schedule in a process of its own
    **{f"lead-{k}": (("runner", "async"), ("async_lead", str(k))) for k in (1, 2, 4, 8, 16)},
}


@dataclass(frozen=True)
class Claims:
    games: tuple[str, ...]
    seeds: int
    factors: tuple[int, ...]
    steps: dict  # algo -> env steps per run (its keys: the algorithms studied)
    runners: tuple[str, ...] = ("sync", "concurrent", "async")  # of RUNNER_VARIANTS
    first: tuple[str, ...] = ()  # of runners: run these before the rest

    @property
    def run_order(self) -> tuple[str, ...]:
        return self.first + tuple(r for r in self.runners if r not in self.first)


SCALES = {
    "smoke": Claims(("Breakout",), 1, (1, 2), {"ppo": 4_096}),  # the pipeline, in CI
    # 2 games x 3 seeds; PPO and A2C 1M steps (~2-3 min a run here), DQN 250k (~8 min)
    "small": Claims(
        ("Breakout", "SpaceInvaders"),
        3,
        (1, 2, 4, 8),
        {"ppo": 1_000_000, "a2c": 1_000_000, "dqn": 250_000},
        ("sync", "concurrent", "async", "async-lag3"),
    ),
    # 2 games x 3 seeds x 3 algorithms x 5 leads, 500k steps a run (PPO's 1M halved to
    # fit the 90 runs in about an hour on 2 cores). The concurrent runner's run is lead 2's,
    # bit for bit (one update of lag either way, by construction): not run twice.
    "lag": Claims(
        ("Breakout", "SpaceInvaders"),
        3,
        (1,),
        {"ppo": 500_000, "appo": 500_000, "impala": 500_000},
        ("lead-1", "lead-2", "lead-4", "lead-8", "lead-16"),
        first=("lead-1", "lead-16", "lead-4"),
    ),
}


# Settings every run of an algorithm takes on top of its preset: the study ran PPO with
# the MinAtar preset of its time (pgx's settings scaled to 16 envs x 128 steps, lr 3e-4, 3
# epochs of minibatch 256; the preset until 2026-12-06, now the preset search's 64 x 128),
# its value loss weighing 0.5 and clipped at 0.2 (pgx's larger-error form; the preset's
# until 2026-12-05); pinned, so a run added later is the same experiment as the committed
# ones, and the batch factors scale these.
def _ppo_study(algo: str) -> tuple[tuple[str, str], ...]:
    return (
        ("batch_B", "16"),
        ("batch_T", "128"),
        (f"{algo}.learning_rate", "0.0003"),
        (f"{algo}.epochs", "3"),
        (f"{algo}.minibatch_size", "256"),
        (f"{algo}.value_coef", "0.5"),
        (f"{algo}.value_clip", "0.2"),
    )


# APPO takes PPO's: the lag study's two differ in the V-trace correction alone.
STUDY_SETTINGS: dict[str, tuple[tuple[str, str], ...]] = {
    "ppo": _ppo_study("ppo"),
    "appo": _ppo_study("appo"),
}


def env_id(game: str) -> str:
    return f"MinAtar/{game}-v1"


def batch_settings(algo: str, env: str, k: int) -> tuple[tuple[str, str], ...]:
    """The x``k`` variant of the preset: ``k`` times the envs (PPO: the same number of
    minibatches, each ``k`` times larger) or, for DQN, ``k`` times the minibatch at a
    ``k`` times lower replay ratio; the learning rate x sqrt(k)."""
    base = RunConfig.for_env(env, algo)
    for key, value in STUDY_SETTINGS.get(algo, ()):
        set_field(base, key, value)
    own = base.algo_config()
    out = [(f"{algo}.learning_rate", repr(own.learning_rate * math.sqrt(k)))]
    if algo == "dqn":
        out += [
            ("dqn.batch_size", str(own.batch_size * k)),
            ("dqn.replay_ratio", repr(own.replay_ratio / k)),
        ]
    else:
        out.append(("batch_B", str(base.batch_B * k)))
        if algo == "ppo":
            out.append(("ppo.minibatch_size", str(own.minibatch_size * k)))
    return tuple(out)


def batch_jobs(claims: Claims) -> list[Job]:
    return [
        Job(
            "rlfw",
            algo,
            env_id(game),
            claims.steps[algo],
            seed,
            settings=STUDY_SETTINGS.get(algo, ()) + batch_settings(algo, env_id(game), k),
            label=f"x{k}",
        )
        for algo in claims.steps
        for game in claims.games
        for k in claims.factors
        for seed in range(claims.seeds)
    ]


def runner_jobs(claims: Claims) -> list[Job]:
    """Game by game, and within a game each runner setting for every algorithm before the
    next setting (the extremes first where the scale lists them so): a study stopped early
    still compares the algorithms at the settings it reached."""
    return [
        Job(
            "rlfw",
            algo,
            env_id(game),
            claims.steps[algo],
            seed,
            settings=STUDY_SETTINGS.get(algo, ()) + RUNNER_VARIANTS[variant],
            label=variant,
        )
        for game in claims.games
        for variant in claims.run_order
        for algo in claims.steps
        if algo != "dqn"
        for seed in range(claims.seeds)
    ]


# -- statistics -------------------------------------------------------------------------
def first_reach(curve: list, target: float, grid: np.ndarray) -> float | None:
    """Where the run's binned training curve first reaches ``target`` (None: never)."""
    values = binned(curve, grid)
    hit = np.flatnonzero(np.nan_to_num(values, nan=-np.inf) >= target)
    return float(grid[hit[0]]) if len(hit) else None


def mean_with_ci(
    values: list[float], reps: int = 2000, seed: int = 0
) -> tuple[float, float, float] | None:
    """Mean and 95% percentile-bootstrap CI over seeds (None when no seed has a value)."""
    if not values:
        return None
    x = np.asarray(values, np.float64)
    picks = np.random.default_rng(seed).integers(len(x), size=(reps, len(x)))
    means = x[picks].mean(axis=1)
    return float(x.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def group_summary(runs: list[dict], target: float | None, steps: int) -> dict:
    done = [r for r in runs if r.get("final_return") is not None]
    out: dict = {
        "seeds": [r["seed"] for r in done],
        "missing": [r["seed"] for r in runs if r.get("final_return") is None],
    }
    if not done:
        return out
    finals = [r["final_return"] for r in done]
    timed = quietly_timed(done)
    out.update(
        finals=finals,
        iqm=iqm_with_ci(finals),
        wall_s=_mean([r["wall_s"] for r in timed]),
        under_load=[r["seed"] for r in done if timed_under_load(r)],
        policy_lag=_mean([r.get("policy_lag") for r in done]),
    )
    if target is not None:
        grid = np.linspace(steps / 40, steps, 40)
        reach = [first_reach(r["curve"], target, grid) for r in done]
        seconds = [
            first_reach(r["curve_s"], target, np.linspace(r["wall_s"] / 40, r["wall_s"] * 1.05, 40))
            for r in timed
        ]
        out.update(
            steps_to_target=mean_with_ci([s for s in reach if s is not None]),
            reached=sum(s is not None for s in reach),
            seconds_to_target=mean_with_ci([s for s in seconds if s is not None]),
        )
    return out


def final_training_return(runs: list[dict], steps: int) -> float | None:
    """The runs' mean training return over the last twentieth of their env steps."""
    ends = [binned(r["curve"], np.array([steps * 0.95, steps]))[-1] for r in runs if r.get("curve")]
    ends = [e for e in ends if np.isfinite(e)]
    return float(np.mean(ends)) if ends else None


def _wall(summary: dict) -> str:
    wall = summary.get("wall_s")
    return "under load" if wall is None and summary.get("seeds") else f"{wall or 0:.0f}"


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


# -- report -----------------------------------------------------------------------------
def plot(groups: dict[str, list[dict]], steps: int, title: str, path: str) -> None:
    """Training return against env steps and against seconds: the mean over seeds with a
    95% bootstrap band (each seed's curve binned onto a common grid first)."""
    fig, axes = figure_and_axes((10, 3.8), 1, 2)
    longest = max(
        (r["wall_s"] for runs in groups.values() for r in runs if r.get("wall_s")), default=1.0
    )
    for label, runs in groups.items():
        runs = [r for r in runs if r.get("curve")]
        if not runs:
            continue
        for ax, key, grid in (
            (axes[0], "curve", np.linspace(steps / 40, steps, 40)),
            (axes[1], "curve_s", np.linspace(longest / 40, longest, 40)),
        ):
            stack = np.array([binned(r[key], grid) for r in runs if r.get(key)])
            if not len(stack):
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(stack, axis=0)
                low, high = bootstrap_band(stack)
            ax.plot(grid, mean, label=f"{label} ({len(stack)} seeds)")
            ax.fill_between(grid, low, high, alpha=0.2)
    axes[0].set(xlabel="env steps", ylabel="training return", title=title)
    axes[1].set(xlabel="seconds", title=title)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def _ci(value) -> str:
    if value is None:
        return "–"
    return "{} [{}, {}]".format(*(f"{v:,.3g}" if v < 1000 else f"{v:,.0f}" for v in value))


def _iqm(value) -> str:
    return "–" if value is None else f"{value[0]:.2f} [{value[1]:.2f}, {value[2]:.2f}]"


def report(part: str, scale: str, claims: Claims, results: list[dict], out: str) -> dict:
    """Per (algo, game): one row per variant, curves as PNG; README.md and results.json."""
    labels = [f"x{k}" for k in claims.factors] if part == "batch" else list(claims.runners)
    data: dict = {"part": part, "scale": scale, "claims": claims.__dict__, "tables": []}
    lines = [
        f"# {part} claim on MinAtar, scale `{scale}`",
        "",
        (__doc__ or "").split("\n\n")[2 if part == "batch" else 3].replace("\n", " "),
        "",
    ]
    pinned = "; ".join(
        f"{algo}: " + ", ".join(f"{k}={v}" for k, v in STUDY_SETTINGS[algo])
        for algo in claims.steps
        if algo in STUDY_SETTINGS
    )
    if pinned:
        lines += [
            f"Every run takes these settings on top of its preset ({pinned}): the "
            "values the study's committed runs had (`STUDY_SETTINGS`).",
            "",
        ]
    done = [r for r in results if r.get("final_return") is not None]
    unchecked = sum(r.get(SETTINGS_FIELD) is None for r in done)
    if unchecked:
        lines += [
            f"{unchecked} of the {len(done)} finished runs were recorded before records "
            "held their settings: not checked against today's.",
            "",
        ]
    for algo in claims.steps:
        for game in claims.games:
            mine = [r for r in results if r["algo"] == algo and r["env"] == env_id(game)]
            if not mine:
                continue
            groups = {label: [r for r in mine if r.get("label") == label] for label in labels}
            steps = claims.steps[algo]
            base = final_training_return(groups[labels[0]], steps)
            target = TARGET_FRACTION * base if base is not None and part == "batch" else None
            rows = {label: group_summary(runs, target, steps) for label, runs in groups.items()}
            png = f"{part}_{algo}_{game}.png"
            plot(groups, steps, f"{algo} {game}", os.path.join(out, png))
            data["tables"].append(
                {"algo": algo, "game": game, "target": target, "rows": rows, "png": png}
            )
            lines += [f"## {algo} MinAtar/{game}, {steps:,} env steps per run", ""]
            if part == "batch":
                lines += [
                    f"Target: {TARGET_FRACTION:.0%} of the x1 final training return"
                    + (f" = {target:.2f}" if target is not None else " (no x1 run yet)")
                    + ".",
                    "",
                    "| batch | final IQM [95% CI] | seeds reaching target | env steps "
                    "to target [95% CI] | seconds to target [95% CI] | wall s |",
                    "|---|---|---:|---|---|---:|",
                ]
                for label, s in rows.items():
                    lines.append(
                        f"| {label} | {_iqm(s.get('iqm'))} | {s.get('reached', 0)}"
                        f"/{len(s['seeds'])} | {_ci(s.get('steps_to_target'))} | "
                        f"{_ci(s.get('seconds_to_target'))} | "
                        f"{_wall(s)} |"
                    )
            else:
                lines += [
                    "| runner | final IQM [95% CI] | policy lag (updates) | wall s |",
                    "|---|---|---:|---:|",
                ]
                for label, s in rows.items():
                    lag = 0.0 if label == "sync" else s.get("policy_lag")  # by construction
                    lines.append(
                        f"| {label} | {_iqm(s.get('iqm'))} | "
                        f"{'–' if lag is None else f'{lag:.2f}'} | "
                        f"{_wall(s)} |"
                    )
            loaded = {label: s["under_load"] for label, s in rows.items() if s.get("under_load")}
            if loaded:
                lines += ["", f"Timed under load, their seconds left out (seeds): {loaded}."]
            missing = {label: s["missing"] for label, s in rows.items() if s["missing"]}
            if missing:
                lines += ["", f"Not finished yet (seeds): {missing}."]
            lines += ["", f"![curves]({png})", ""]
    write_json(os.path.join(out, "results.json"), data)
    write_text(os.path.join(out, "README.md"), "\n".join(lines))
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("batch", "runners"), required=True)
    parser.add_argument("--scale", choices=sorted(SCALES), default="small")
    parser.add_argument(
        "--out", help="default docs/scaling/<scale>/<part>-minatar (smoke: a temporary folder)"
    )
    parser.add_argument("--max-parallel", type=int, default=2)
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: rebuild the report from the records",
    )
    parser.add_argument(
        "--algos",
        help="comma-separated: run only these algorithms' jobs "
        "now (the report still covers every recorded run)",
    )
    args = parser.parse_args(argv)
    claims = SCALES[args.scale]
    to_run = set(claims.steps) if args.algos is None else set(args.algos.split(","))
    if not to_run <= set(claims.steps):
        parser.error(
            f"--algos {args.algos!r}: the {args.scale} scale studies {', '.join(claims.steps)}"
        )
    # a smoke run checks the pipeline: it never writes into docs/
    out = args.out or (
        tempfile.mkdtemp(prefix="claims-smoke-")
        if args.scale == "smoke"
        else os.path.join("docs", "scaling", args.scale, f"{args.part}-minatar")
    )
    os.makedirs(out, exist_ok=True)
    jobs = batch_jobs(claims) if args.part == "batch" else runner_jobs(claims)
    print(f"claims {args.part} ({args.scale}): {len(jobs)} runs -> {out}", flush=True)
    count = [0]

    def say(result: dict) -> None:
        count[0] += 1
        final = result.get("final_return")
        print(
            f"[{count[0]}/{len(jobs)}] {result['algo']} {result['env']} {result['label']} "
            f"seed {result['seed']}: "
            + (
                result.get("status", "")
                if final is None
                else f"final {final:.2f}, {result['wall_s']:.0f} s"
            ),
            flush=True,
        )

    def task(job: Job, cores: list[int] | None = None) -> dict:
        run = run_job if job.algo in to_run and not args.report_only else finished
        return run(job, out_dir=out, cores=cores)

    results = LocalBackend(args.max_parallel).map(task, [(j,) for j in jobs], say)
    report(args.part, args.scale, claims, results, out)
    print(f"claims: report in {os.path.join(out, 'README.md')}")
    return 0 if all(r.get("final_return") is not None for r in results) or args.report_only else 1


if __name__ == "__main__":
    sys.exit(main())
