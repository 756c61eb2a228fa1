"""The benchmark's report: ``README.md`` (a table per entry), ``results.json`` (every run)
and ``curves_<entry>.png`` (training-episode returns, mean and 95% CI over seeds)."""

from __future__ import annotations

import os
import platform
import warnings
from typing import Any, Mapping, Sequence, TypedDict

import numpy as np
import numpy.typing as npt

from rlfw.bench.clock import LOADED_WAIT_SHARE, quietly_timed, timed_under_load
from rlfw.bench.suites import Entry, Suite, references
from rlfw.logging.plot import figure_and_axes
from rlfw.runfolder.files import write_atomically, write_json, write_text

CI_REPS = 2000  # bootstrap resamples
SETTINGS_FIELD = "config"  # a record's settings: flat dotted keys (run.job_settings)

# A run's record (``run.write_record``) or any other part of a report, as JSON holds it.
Record = dict[str, Any]


class Failure(TypedDict):
    seed: int
    status: str
    log_tail: str


class Summary(TypedDict, total=False):
    """``summarize``'s: ``seeds``, ``failed`` and ``not_run`` always; the rest once a run is
    done. Read back from ``results.json`` it is a plain dict, hence ``Mapping`` readers."""

    seeds: list[int]
    failed: list[Failure]
    not_run: list[int]
    finals: list[float]
    mean: float
    std: float
    median: float
    wall_s: float | None
    steps_per_s: float | None
    timed_under_load: list[int]
    load_unrecorded: list[int]
    unrecorded_timed: bool
    settings_unrecorded: list[int]
    settings: str
    iqm: float
    iqm_low: float
    iqm_high: float


class Goals(TypedDict, total=False):
    """``_goals``': all of these for a suite with a peer, none otherwise."""

    median_at_least_peer: bool
    iqm_not_below_peer_ci: bool
    time_goal: float
    time_ratio: float | None
    time_goal_met: bool | None


def iqm_with_ci(
    finals: Sequence[float] | npt.NDArray[np.float64], seed: int = 0
) -> tuple[float, float, float]:
    """The interquartile mean of ``finals`` (one per seed) and its 95% stratified-bootstrap
    CI, by rliable: a function of ``finals`` and ``seed`` alone, the process's global
    numpy RNG left as it was."""
    from rliable import library as rly
    from rliable import metrics

    scores = {"x": np.asarray(finals, np.float64).reshape(-1, 1)}
    # rliable's StratifiedBootstrap draws its resamples from numpy's global RNG and not
    # from the random_state it is given (rliable 1.2), so a report's CIs depended on
    # whatever had drawn before and a rebuild from the same records could move a bound
    # (seen: 29.35 -> 29.48). Seeded here for the call, the caller's state put back.
    before = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():  # arch's notice about its random_state argument
            warnings.simplefilter("ignore", FutureWarning)
            point, interval = rly.get_interval_estimates(
                scores,
                lambda s: np.array([metrics.aggregate_iqm(s)]),
                reps=CI_REPS,
                random_state=np.random.RandomState(seed),
            )
    finally:
        np.random.set_state(before)
    return float(point["x"][0]), float(interval["x"][0][0]), float(interval["x"][1][0])


def summarize(results: list[Record]) -> Summary:
    """Per-seed finals, mean ± std, median, IQM [CI], wall-clock and steps/s of one
    framework on one entry."""
    done = [r for r in results if r.get("final_return") is not None]
    out: Summary = {
        "seeds": [r["seed"] for r in done],
        "failed": [
            {"seed": r["seed"], "status": r["status"], "log_tail": r.get("log_tail", "")}
            for r in results
            if r["status"].startswith("failed")
        ],
        "not_run": [r["seed"] for r in results if r["status"] == "not run"],
    }
    if not done:
        return out
    finals = np.array([r["final_return"] for r in done])
    # seconds taken under load say nothing about speed: time from the other runs only
    timed = quietly_timed(done)
    out.update(
        {
            "finals": finals.tolist(),
            "mean": float(finals.mean()),
            "std": float(finals.std()),
            "median": float(np.median(finals)),
            "wall_s": float(np.mean([r["wall_s"] for r in timed])) if timed else None,
            "steps_per_s": float(np.mean([r["steps_per_s"] for r in timed])) if timed else None,
            "timed_under_load": [r["seed"] for r in done if timed_under_load(r)],
            "load_unrecorded": [r["seed"] for r in done if timed_under_load(r) is None],
            "unrecorded_timed": any(timed_under_load(r) is None for r in timed),
            "settings_unrecorded": [r["seed"] for r in done if r.get(SETTINGS_FIELD) is None],
            "settings": done[0]["settings"],
        }
    )
    out["iqm"], out["iqm_low"], out["iqm_high"] = iqm_with_ci(finals)
    return out


def write_report(
    name: str, suite: Suite, results: list[Record], out_dir: str, baseline: Sequence[Record] = ()
) -> Record:
    """Write README.md, results.json and the curves into ``out_dir``; returns the data.
    ``baseline``: another suite's finished rlfw runs on this suite's envs (its
    ``Suite.baseline``), read alongside this suite's algorithms env by env."""
    os.makedirs(out_dir, exist_ok=True)
    frameworks = list(dict.fromkeys(r["framework"] for r in results))
    entries: list[Record] = []
    for entry in suite.entries:
        mine = entry_runs(entry, results)
        names = [fw for fw in frameworks if fw == "rlfw" or entry.peer]
        if entry.ablation is not None:
            names.append(entry.ablation.framework)
        summary = {fw: summarize([r for r in mine if r["framework"] == fw]) for fw in names}
        entries.append(
            {
                "algo": entry.algo,
                "env": entry.env,
                "steps": entry.budget,
                "references": list(references(entry)),
                "frameworks": summary,
                "goals": _goals(summary, suite.time_goal),
                "ablation": None
                if entry.ablation is None
                else {"framework": entry.ablation.framework, "about": entry.ablation.about},
                "curve_png": _plot_curves(entry, mine, out_dir),
                "gif": _agent_gif(entry, mine, out_dir),
            }
        )
    data = {
        "suite": name,
        "about": suite.about,
        "decimals": suite.decimals,
        "machine": _machine(),
        "has_peer": suite.has_peer,
        "peer_differences": _peer_differences(suite),
        "entries": entries,
        "comparison": _comparison(suite, results, baseline, out_dir),
        "runs": [{k: v for k, v in r.items() if k != "curve"} for r in results],
    }
    write_json(os.path.join(out_dir, "results.json"), data)
    write_text(os.path.join(out_dir, "README.md"), markdown(data))
    return data


def entry_runs(entry: Entry, results: Sequence[Record]) -> list[Record]:
    """The runs of ``entry`` among ``results``: its frameworks' and its ablation's, the
    latter under the framework name ``Ablation.framework``."""
    out: list[Record] = []
    for r in results:
        if (r["algo"], r["env"], r["steps"]) != (entry.algo, entry.env, entry.budget):
            continue
        label = r.get("label", "")
        if not label:
            out.append(r)
        elif entry.ablation is not None and label == entry.ablation.label:
            out.append({**r, "framework": entry.ablation.framework})
    return out


def _comparison(
    suite: Suite, results: list[Record], baseline: Sequence[Record], out_dir: str
) -> list[Record]:
    """Per env of a suite with a baseline: each algorithm's rlfw runs summarized (the
    baseline's first) and their curves in one plot."""
    if suite.baseline is None:
        return []
    out: list[Record] = []
    for env, budget in dict.fromkeys((e.env, e.budget) for e in suite.entries):
        runs = [
            r
            for r in [*baseline, *results]
            if r["framework"] == "rlfw"
            and not r.get("label")
            and (r["env"], r["steps"]) == (env, budget)
        ]
        algos = dict.fromkeys([suite.baseline[1], *(r["algo"] for r in runs)])
        out.append(
            {
                "env": env,
                "steps": budget,
                "baseline": list(suite.baseline),
                "algos": {a: summarize([r for r in runs if r["algo"] == a]) for a in algos},
                "curve_png": _plot_curves(Entry("vs", env, budget), runs, out_dir, group="algo"),
            }
        )
    return out


def _goals(summary: Mapping[str, Mapping[str, Any]], time_goal: float) -> Goals:
    """The goals for a suite with a peer: rlfw's median final return at least the peer's,
    its IQM not below the lower bound of the peer's IQM 95% CI (what a few seeds can
    say: a tie is not a loss), and its wall-clock at most ``time_goal`` x the peer's."""
    ours, peer = summary.get("rlfw", {}), summary.get("sb3", {})
    if "median" not in ours or "median" not in peer:
        return {}
    out: Goals = {
        "median_at_least_peer": ours["median"] >= peer["median"],
        "iqm_not_below_peer_ci": ours["iqm"] >= peer["iqm_low"],
        "time_goal": time_goal,
        "time_ratio": None,
        "time_goal_met": None,
    }
    if ours["wall_s"] is not None and peer["wall_s"] is not None:  # else: all under load
        out.update(
            {
                "time_ratio": ours["wall_s"] / peer["wall_s"],
                "time_goal_met": ours["wall_s"] <= time_goal * peer["wall_s"],
            }
        )
    return out


def _peer_differences(suite: Suite) -> dict[str, list[str]]:
    """What still differs between rlfw and SB3 run with rlfw's settings, per algorithm."""
    if suite.peer_settings != "same":
        return {}
    from rlfw.bench.same_settings import differences
    from rlfw.launch.config import RunConfig

    out: dict[str, list[str]] = {}
    for e in suite.entries:
        if not e.peer:
            continue
        found = out.setdefault(e.algo, [])
        found += [
            d for d in differences(RunConfig.for_env(e.env, e.algo, e.budget)) if d not in found
        ]
    return out


def _machine() -> str:
    import psutil

    return (
        f"{platform.processor() or platform.machine()}, "
        f"{psutil.cpu_count(logical=False)} cores, one torch thread and one core per run"
    )


def _plot_curves(
    entry: Entry, results: list[Record], out_dir: str, group: str = "framework"
) -> str | None:
    """Training-episode returns on a common grid of env steps (each run's episodes
    averaged within each grid cell), mean and 95% bootstrap CI over seeds, one line per
    value of the runs' ``group`` field."""
    try:
        fig, ax = figure_and_axes((6, 4))
    except ImportError:
        return None
    grid = curve_grid(entry.budget)
    for fw in dict.fromkeys(r[group] for r in results):
        curves = [binned(r["curve"], grid) for r in results if r[group] == fw and r.get("curve")]
        if not curves:
            continue
        stack = np.array(curves)
        with warnings.catch_warnings():  # cells before a run's first episode are empty
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(stack, axis=0)
            low, high = bootstrap_band(stack)
        ax.plot(grid, mean, label=f"{fw} ({len(curves)} seeds)")
        ax.fill_between(grid, low, high, alpha=0.25)
    ax.set(
        xlabel="env steps",
        ylabel="training episode return",
        title=f"{entry.algo} {entry.env}" if group == "framework" else entry.env,
    )
    if ax.lines:  # a suite's first report may come before any run finished
        ax.legend()
    fig.tight_layout()
    name = f"curves_{entry.name}.png"
    write_atomically(os.path.join(out_dir, name), lambda f: fig.savefig(f, dpi=90, format="png"))
    return name


def _agent_gif(entry: Entry, results: list[Record], out_dir: str) -> dict[str, str] | None:
    """rlfw seed 0's GIF (one evaluation episode of its final policy), copied next to the
    report as ``agent_<entry>.gif`` (the copy is kept when the run folder is gone, as in a
    fresh clone); None when that run recorded none."""
    name = f"agent_{entry.name}.gif"
    for r in results:
        if not (r["framework"] == "rlfw" and r["seed"] == 0 and r.get("gif")):
            continue
        if os.path.isfile(r["gif"]):
            with open(r["gif"], "rb") as f:
                blob = f.read()
            write_atomically(os.path.join(out_dir, name), lambda out: out.write(blob))
        elif not os.path.isfile(os.path.join(out_dir, name)):
            continue
        episode = os.path.basename(r["gif"])
        return {
            "file": name,
            "about": f"rlfw seed 0, final policy, one evaluation "
            f"episode ({episode.rsplit('.', 1)[0]})",
        }
    return None


def curve_grid(steps: int, points: int = 20) -> np.ndarray:
    return np.linspace(steps / points, steps, points)


def binned(curve: Sequence[Sequence[float]], grid: np.ndarray) -> np.ndarray:
    """Mean return of the curve's points in each grid cell (carried forward when a cell
    has none)."""
    steps = np.array([s for s, _ in curve], np.float64)
    values = np.array([v for _, v in curve], np.float64)
    out, last, lower = np.full(len(grid), np.nan), np.nan, 0.0
    for i, upper in enumerate(grid):
        inside = (steps > lower) & (steps <= upper)
        last = values[inside].mean() if inside.any() else last
        out[i], lower = last, upper
    return out


def bootstrap_band(
    stack: np.ndarray, reps: int = 1000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """95% percentile-bootstrap interval of the mean over rows (seeds), per column."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(len(stack), size=(reps, len(stack)))
    means = np.nanmean(stack[picks], axis=1)
    return np.nanpercentile(means, 2.5, axis=0), np.nanpercentile(means, 97.5, axis=0)


def _num(x: float, decimals: int = 1) -> str:
    return f"{x:,.{decimals}f}"


def iqm_cell(summary: Mapping[str, Any], decimals: int = 1) -> str:
    """``IQM [low, high]`` of a framework's summary, as every report shows it."""
    low, high = _num(summary["iqm_low"], decimals), _num(summary["iqm_high"], decimals)
    return f"{_num(summary['iqm'], decimals)} [{low}, {high}]"


def _seconds(x: float | None, fmt: str) -> str:
    return "under load" if x is None else format(x, fmt)


def _record_notes(framework: str, summary: Mapping[str, Any]) -> list[str]:
    """Which seeds' seconds the table leaves out (timed under load) or cannot vouch for
    (their record predates the run-queue measure), and whose settings it cannot check."""
    notes = []
    if summary.get("timed_under_load"):
        notes += [
            "",
            f"{framework}: seeds {summary['timed_under_load']} were timed under "
            f"load (their threads waited for a CPU more than "
            f"{LOADED_WAIT_SHARE:.0%} of the time); their seconds are left out.",
        ]
    if summary.get("load_unrecorded"):
        seeds = summary["load_unrecorded"]
        if summary.get("unrecorded_timed"):
            notes += [
                "",
                f"{framework}: seeds {seeds} ran before runs recorded their load, "
                f"and no seed was recorded as timed quietly: the seconds are "
                f"theirs and may include another job's.",
            ]
        else:
            notes += [
                "",
                f"{framework}: seeds {seeds} ran before runs recorded their load; "
                f"their seconds are left out, since other seeds were recorded "
                f"as timed quietly.",
            ]
    if summary.get("settings_unrecorded"):
        notes += [
            "",
            f"{framework}: seeds {summary['settings_unrecorded']} were recorded "
            "before records held their settings: not checked against today's.",
        ]
    return notes


def _comparison_markdown(comparison: list[Record]) -> list[str]:
    """One table per env: the baseline's rlfw runs and this suite's algorithms."""
    lines = []
    for c in comparison:
        suite, algo = c["baseline"]
        lines += [
            f"## {c['env']}, {c['steps']:,} env steps: against {algo}",
            "",
            f"{algo}: the `{suite}` suite's runs (its records, "
            f"`docs/benchmarks/{suite}/`); the same budget, seeds and evaluation.",
            "",
            "| algorithm | per-seed final return | IQM [95% CI] | wall s |",
            "|---|---|---|---:|",
        ]
        for name, s in c["algos"].items():
            if "finals" not in s:
                lines.append(f"| {name} | (no finished run) | | |")
                continue
            lines.append(
                f"| {name} | {', '.join(_num(x) for x in s['finals'])} | "
                f"{iqm_cell(s)} | {_seconds(s['wall_s'], '.0f')} |"
            )
        if c["curve_png"]:
            lines += ["", f"![learning curves]({c['curve_png']})"]
        lines.append("")
    return lines


def markdown(data: Record) -> str:
    lines = [
        f"# Benchmark suite `{data['suite']}`",
        "",
        data["about"] + ".",
        "",
        f"Machine: {data['machine']}. Re-run: `python -m rlfw benchmark --suite "
        f"{data['suite']}{' --peer sb3' if data.get('has_peer', True) else ''}` "
        f"(finished runs are skipped). Final return: the "
        f"policy at the end of training, deterministic actions, normalization statistics "
        f"frozen, 20 fresh episodes (seeds 10000+seed). IQM and its 95% CI: rliable, "
        f"stratified bootstrap over seeds. Time: training only, mean over seeds.",
        "",
    ]
    if data.get("peer_differences"):
        lines += [
            "The SB3 peer runs with rlfw's preset settings and network "
            "(`rlfw/bench/same_settings.py`: the same envs, batch sizes, "
            "hyper-parameters and network: the CNN torso with linear heads, or rlfw's "
            "observation encoder under MLPs). What still differs:",
            "",
        ]
        lines += [f"- {algo}: {d}" for algo, ds in data["peer_differences"].items() for d in ds]
        lines.append("")
    lines += _comparison_markdown(data.get("comparison", []))
    digits = data.get("decimals", 1)
    for e in data["entries"]:
        lines += [
            f"## {e['algo']} {e['env']}, {e['steps']:,} env steps",
            "",
            "| framework | settings | per-seed final return | mean ± std | median | "
            "IQM [95% CI] | wall s | env steps/s |",
            "|---|---|---|---|---:|---|---:|---:|",
        ]
        for fw, s in e["frameworks"].items():
            if "finals" not in s:
                lines.append(f"| {fw} | | (no finished run yet) | | | | | |")
                continue
            per_seed = ", ".join(_num(x, digits) for x in s["finals"])
            lines.append(
                f"| {fw} | {s['settings']} | {per_seed} | {_num(s['mean'], digits)} ± "
                f"{_num(s['std'], digits)} | {_num(s['median'], digits)} | "
                f"{iqm_cell(s, digits)} | "
                f"{_seconds(s['wall_s'], '.0f')} | "
                f"{_seconds(s['steps_per_s'], ',.0f')} |"
            )
        for fw, s in e["frameworks"].items():
            lines += _record_notes(fw, s)
            if s["not_run"]:
                lines += [
                    "",
                    f"{fw}: seeds {s['not_run']} not run yet (the session's time "
                    "ran out; `rlfw benchmark` again runs them).",
                ]
            for fail in s["failed"]:
                lines += [
                    "",
                    f"{fw} seed {fail['seed']}: {fail['status']}; its log ends:",
                    "```",
                    fail["log_tail"].rstrip(),
                    "```",
                ]
        if e.get("ablation"):
            lines += ["", f"{e['ablation']['framework']}: {e['ablation']['about']}."]
        g = e["goals"]
        if g:
            time = (
                "not measured: one side's runs were all timed under load"
                if g["time_ratio"] is None
                else f"**{g['time_ratio']:.2f}x** (goal <= {g['time_goal']}x: "
                f"{'met' if g['time_goal_met'] else 'not met'})"
            )
            lines += [
                "",
                f"rlfw / SB3 time: {time}; median final return rlfw >= SB3: "
                f"{'met' if g['median_at_least_peer'] else 'not met'}; rlfw's IQM not "
                "below SB3's 95% CI: "
                f"{'met' if g['iqm_not_below_peer_ci'] else 'not met'}.",
            ]
        if e["references"]:
            lines += ["", "Published: " + "; ".join(e["references"]) + "."]
        if e["curve_png"]:
            lines += ["", f"![learning curves]({e['curve_png']})"]
        if e.get("gif"):
            lines += [
                "",
                f"![{e['algo']} on {e['env']}, trained]({e['gif']['file']})",
                "",
                f"*{e['gif']['about']}.*",
            ]
        lines.append("")
    return "\n".join(lines)
