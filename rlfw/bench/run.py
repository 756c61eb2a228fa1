"""``rlfw benchmark``: named suites of (algorithm, env, budget), each run for several seeds
with rlfw's preset and, with ``--peer sb3``, with stable-baselines3 on rl-baselines3-zoo's
settings for that env (read from the installed ``rl_zoo3`` package, not copied).

Every run is a child process (``rlfw.bench.job``) pinned to its own cores by the
sweep's backends, with one torch thread; a run folder holding ``result.json`` is finished
and a re-run skips it. Both frameworks' final policies are evaluated the same way: the
policy at the end of training, deterministic actions, observation statistics frozen, 20
fresh episodes. The report (``README.md``, ``results.json``, one learning-curve PNG per
entry) gives per-seed returns, mean ± std, the IQM with a 95% stratified-bootstrap CI
(``rliable``), wall-clock and env steps/s per framework, and published reference numbers.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, TypeVar

from rlfw.bench.report import SETTINGS_FIELD, Record, write_report
from rlfw.bench.suites import SUITES, Entry, Suite
from rlfw.launch.backends import job_process_setup
from rlfw.runfolder.files import write_json
from rlfw.utils.checks import check_seeds

if TYPE_CHECKING:  # imported where used: it loads every algorithm
    from rlfw.launch.config import RunConfig

EVAL_EPISODES = 20
EVAL_SEED_OFFSET = 10_000  # evaluation envs: seeds no training env used
RESULT_FILE, LOG_FILE = "result.json", "job.log"
RECORDS = "records"  # OUT/records/<entry>/<framework>-seed=<s>.json: committed
RECORD_CURVE_POINTS = 400  # a record keeps at most this many curve points
SKIPPED = "skipped"  # a result read from its record, not run now: never reported

T = TypeVar("T")


class Backend(Protocol):
    """Where a suite's runs go (``rlfw.launch.backends``: ``LocalBackend``, ``RayBackend``)."""

    def map(
        self, task: Callable[..., T], jobs: Sequence[tuple[Any, ...]], report: Callable[[T], None]
    ) -> list[T]: ...


@dataclass(frozen=True)
class Job:
    """One run: a framework, an entry and a seed; a study's variant adds ``settings``
    (dotted config keys and values on top of rlfw's preset) under a ``label``."""

    framework: str
    algo: str
    env: str
    steps: int
    seed: int
    wandb_group: str | None = None  # rlfw runs log to W&B in this group (--wandb)
    peer_settings: str = "zoo"  # the peer's: rl-zoo's for the env, or rlfw's ("same")
    settings: tuple[tuple[str, str], ...] = ()
    label: str = ""

    @classmethod
    def from_json(cls, text: str) -> "Job":
        data = json.loads(text)
        data["settings"] = tuple(tuple(kv) for kv in data.get("settings", ()))
        return cls(**data)

    def _name(self) -> str:
        entry = Entry(self.algo, self.env, self.steps).name
        return f"{entry}-{self.label}" if self.label else entry

    def run_dir(self, out_dir: str) -> str:
        return os.path.join(out_dir, "runs", self._name(), self.framework, f"seed={self.seed}")

    def record_path(self, out_dir: str) -> str:
        """The finished run's small record, beside the report (the run folders are not
        committed; the records are, so a suite continues on another machine)."""
        return os.path.join(
            out_dir, RECORDS, self._name(), f"{self.framework}-seed={self.seed}.json"
        )


def job_config(job: Job) -> RunConfig:
    """The ``RunConfig`` that ``job`` trains with (rlfw's run, and the SB3 peer's on
    rlfw's settings): the preset as ``rlfw train`` builds it, without evaluations during
    training (SB3 runs none either), a study variant's settings on top."""
    from rlfw.launch.config import RunConfig, set_field

    config = RunConfig.for_env(job.env, job.algo, job.steps, seed=job.seed)
    config.schedule.eval_every = None
    for key, value in job.settings:
        set_field(config, key, value)
    if job.wandb_group:
        config.wandb.enabled, config.wandb.group = True, job.wandb_group
    return config


def job_settings(job: Job) -> dict[str, Any] | None:
    """The settings a record of ``job`` holds: ``config_settings`` of its config; for the
    SB3 peer on rl-zoo's settings, the zoo's block for the env (``zoo.<key>``), or None
    where the zoo is not installed here to say."""
    if _runs_zoo_settings(job):
        return _zoo_job_settings(job)
    settings = config_settings(job_config(job))
    if job.framework != "rlfw":
        from rlfw.bench.same_settings import NOT_READ_BY_SB3

        settings = {k: v for k, v in settings.items() if k not in NOT_READ_BY_SB3}
    return settings


def _runs_zoo_settings(job: Job) -> bool:
    return job.framework != "rlfw" and job.peer_settings != "same"


def config_settings(config: RunConfig) -> dict[str, Any]:
    """The keys of ``config`` its run reads, flat and dotted, as JSON gives them back.
    Left out: other algorithms' groups, Atari's options off Atari, and W&B's fields
    (where a run logs changes nothing it learns)."""
    from rlfw.envs import is_atari
    from rlfw.launch.config import flatten
    from rlfw.registry import ALGOS

    unread = {"wandb", *(name for name in ALGOS.names() if name != config.algo)}
    if not is_atari(config.env):
        unread.add("atari")
    plain = json.loads(json.dumps(config.to_dict()))
    return {key: value for key, value in flatten(plain) if key.split(".")[0] not in unread}


def _zoo_job_settings(job: Job) -> dict[str, Any] | None:
    from rlfw.bench.zoo import zoo_settings
    from rlfw.launch.config import flatten

    try:
        block = zoo_settings(job.algo, job.env)
    except ImportError:  # rl_zoo3 (extra [bench]) not installed: nothing to compare with
        return None
    if block is None:
        return None
    # the budget is the job's own (``steps``), not the zoo's
    ran = {key: value for key, value in block.items() if key != "n_timesteps"}
    return dict(flatten(json.loads(json.dumps({"zoo": ran}))))


def plan(
    suite: Suite,
    frameworks: Sequence[str],
    seeds: Sequence[int],
    wandb_group: str | None = None,
    recorded_in: str | None = None,
) -> list[Job]:
    """Every entry x framework x seed, entries in suite order; with ``recorded_in`` (a
    suite folder), also each entry's further seeds whose records are there (an entry
    given more seeds than the suite's, to settle it, stays in its report)."""
    jobs = []
    for e in suite.entries:
        runs = [
            Job(
                fw,
                e.algo,
                e.env,
                e.budget,
                0,
                wandb_group if fw == "rlfw" else None,
                suite.peer_settings,
            )
            for fw in frameworks
            if fw == "rlfw" or e.peer
        ]
        if e.ablation is not None and "rlfw" in frameworks:
            runs.append(replace(runs[0], settings=e.ablation.settings, label=e.ablation.label))
        for job in runs:
            more = recorded_seeds(job, recorded_in) if recorded_in else []
            jobs += [replace(job, seed=s) for s in sorted({*seeds, *more})]
    return jobs


def recorded_seeds(job: Job, out_dir: str) -> list[int]:
    """The seeds of ``job``'s entry and framework that have a record in ``out_dir``."""
    folder = os.path.dirname(job.record_path(out_dir))
    pattern = re.compile(rf"{re.escape(job.framework)}-seed=(\d+)\.json")
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return [int(m.group(1)) for m in map(pattern.fullmatch, names) if m]


def run_job(job: Job, out_dir: str, cores: Sequence[int] | None = None) -> Record:
    """Run ``job`` in a child process (on ``cores`` if given) unless its folder holds a
    result already; returns the result, or a ``failed`` record with the log's tail."""
    before = finished(job, out_dir)
    if before["status"] != "not run":
        return before
    run_dir = job.run_dir(out_dir)
    path = os.path.join(run_dir, RESULT_FILE)
    os.makedirs(run_dir, exist_ok=True)
    argv = [sys.executable, "-m", "rlfw.bench.job", json.dumps(asdict(job)), run_dir]
    # SB3 gives a model without a logger of its own a fresh folder in the system's temp
    # directory, and never removes it: SB3_LOGDIR keeps it in the run folder instead.
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "SB3_LOGDIR": os.path.join(run_dir, "sb3-log"),
    }
    with open(os.path.join(run_dir, LOG_FILE), "w") as log:
        code = subprocess.call(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=job_process_setup(cores)
        )
    if code == 0 and os.path.exists(path):
        with open(path) as f:
            # Reported as its record: the report written now is the one a later
            # --report-only rebuilds from the committed records, to the byte.
            return write_record(job, out_dir, json.load(f))
    with open(os.path.join(run_dir, LOG_FILE), errors="replace") as f:
        tail = "".join(f.readlines()[-15:])
    return {**asdict(job), "status": f"failed (exit {code})", "log_tail": tail}


def finished(job: Job, out_dir: str, cores: Sequence[int] | None = None) -> Record:
    """A job's record (written from its run folder's result first, for a run finished
    before records existed) marked ``skipped``, else a ``not run`` record (no training)."""
    record, result = job.record_path(out_dir), os.path.join(job.run_dir(out_dir), RESULT_FILE)
    if os.path.exists(record):
        return {**read_record(record, job), SKIPPED: True}
    if os.path.exists(result):
        with open(result) as f:
            return {**write_record(job, out_dir, json.load(f)), SKIPPED: True}
    return {**asdict(job), "status": "not run"}


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_curve(value: object) -> bool:
    return isinstance(value, list) and all(
        isinstance(p, list) and len(p) == 2 and all(map(_is_number, p)) for p in value
    )


# A record's fields and what each must hold; the optional ones may also be null.
_RECORD_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "framework": (lambda v: isinstance(v, str), "text"),
    "status": (lambda v: isinstance(v, str), "text"),
    "final_return": (_is_number, "a number"),
    "returns": (lambda v: isinstance(v, list) and all(map(_is_number, v)), "a list of numbers"),
    "curve": (_is_curve, "a list of [step, return] pairs"),
    "curve_s": (_is_curve, "a list of [seconds, return] pairs"),
    "wall_s": (_is_number, "a number"),
    "steps_per_s": (_is_number, "a number"),
}
_OPTIONAL_RECORD_FIELDS = {
    "wait_share": (_is_number, "a number"),
    "policy_lag": (_is_number, "a number"),
    "gif": (lambda v: isinstance(v, str), "text"),
}


def read_record(path: str, job: Job) -> Record:
    """The committed record of ``job``'s run, checked before a report counts it: records
    travel between machines and through git, so a broken, hand-edited or misplaced one
    is an error naming the file and the field, not a wrong table or a traceback."""
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"run record {path} is not valid JSON: {err}") from None
    if not isinstance(record, dict):
        raise ValueError(f"run record {path} holds {type(record).__name__}, not an object")
    for key in ("framework", "algo", "env", "seed", "steps"):
        if record.get(key) != getattr(job, key):
            raise ValueError(
                f"run record {path} says {key}={record.get(key)!r}, but it is "
                f"the place of {job.framework} {job.algo} on {job.env}, seed "
                f"{job.seed}, {job.steps} steps: a record of another run"
            )
    checks = [(k, *c, False) for k, c in _RECORD_FIELDS.items()]
    checks += [(k, *c, True) for k, c in _OPTIONAL_RECORD_FIELDS.items()]
    for key, ok, what, optional in checks:
        value = record.get(key)
        if not ((optional and value is None) or ok(value)):
            raise ValueError(
                f"run record {path}: {key} must be {what}"
                + (" or null" if optional else "")
                + f", got {value!r}"[:200]
            )
    _check_recorded_settings(path, record, job)
    return record


def _check_recorded_settings(path: str, record: Record, job: Job) -> None:
    """Refuse a record whose settings differ from what ``job`` runs today (a preset or a
    default changed since it ran): a report would give its numbers as today's settings.
    An rlfw key the record lacks was added since it ran: the record ran with its default,
    so today's non-default value is a change; a key today lacks (removed since) is not
    compared. The zoo's block is the whole of the peer's settings: a key on either side
    alone is a change. A record written before records held their settings has none."""
    recorded = record.get(SETTINGS_FIELD)
    if recorded is None:
        return
    if not isinstance(recorded, dict):
        raise ValueError(
            f"run record {path}: {SETTINGS_FIELD} must be an object of dotted "
            f"keys and values, got {recorded!r}"[:300]
        )
    today = job_settings(job) or {}
    changed = [
        f"{key}={recorded[key]!r} where today's is {today[key]!r}"
        for key in recorded
        if key in today and recorded[key] != today[key]
    ]
    if not _runs_zoo_settings(job):
        defaults = _default_settings(job)
        changed += [
            f"{key} unset (it came later: the run had its default {defaults[key]!r}) "
            f"where today's is {today[key]!r}"
            for key in today
            if key not in recorded and key in defaults and today[key] != defaults[key]
        ]
    else:
        changed += [
            f"{key} unset where today's is {today[key]!r}" for key in today if key not in recorded
        ]
        changed += [
            f"{key}={recorded[key]!r} where today's sets none"
            for key in recorded
            if key not in today
        ]
    if changed:
        listed = "; ".join(changed[:4])
        more = f" (and {len(changed) - 4} more)" if len(changed) > 4 else ""
        raise ValueError(
            f"run record {path} ran with {listed}{more}: its numbers are not "
            "those of today's settings. Delete the record (and its run folder) to run "
            "it again, or report it from the commit it ran at"
        )


def _default_settings(job: Job) -> dict[str, Any]:
    """What a run of ``job``'s algorithm and env reads with no preset: the values a key
    added later had for records that ran before it."""
    from rlfw.launch.config import RunConfig

    return config_settings(RunConfig(algo=job.algo, env=job.env))


def write_record(job: Job, out_dir: str, result: Record) -> Record:
    """Write and return the run's record: its settings, per-episode final returns,
    seconds, steps/s and the training curves (``thin_curve``)."""
    record = {**result, **{key: thin_curve(result.get(key) or []) for key in ("curve", "curve_s")}}
    path = job.record_path(out_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_json(path, record)
    return record


def thin_curve(
    points: Sequence[Sequence[float]], most: int = RECORD_CURVE_POINTS
) -> list[list[float]]:
    """``points`` ((step, return) pairs in step order) as at most ``most`` points, each
    the mean step and mean return of a block of consecutive points. Means, not every
    k-th point: a peer's curve of single episodes' returns, binned onto the report's
    grid, keeps its cells' means (every k-th episode alone is far noisier)."""
    size = -(-len(points) // most)
    if size <= 1:
        return [list(p) for p in points]
    return [
        [sum(p[0] for p in block) / len(block), sum(p[1] for p in block) / len(block)]
        for block in (points[i : i + size] for i in range(0, len(points), size))
    ]


def run_suite(
    name: str,
    out_dir: str,
    backend: Backend,
    peer: str | None = None,
    seeds: Sequence[int] | None = None,
    say: Callable[[str], None] = print,
    report_only: bool = False,
    wandb: bool = False,
    entries: Sequence[str] | None = None,
) -> Record:
    """Run what is not finished of suite ``name`` on ``backend`` and write its report
    into ``out_dir``; returns the report's data. ``report_only``: run nothing, report the
    runs finished so far. ``wandb``: rlfw's runs log to W&B in the group
    ``benchmark-<suite>``. ``entries``: run only these (by ``Entry.name``); the report
    reads the others' finished runs."""
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}; one of {', '.join(SUITES)}")
    names = [e.name for e in SUITES[name].entries]
    unknown = sorted(set(entries or ()) - set(names))
    if unknown:
        raise ValueError(f"suite {name!r} has no entries {unknown}; its entries: {names}")
    if peer not in (None, "sb3"):
        raise ValueError(f"--peer {peer!r} is not supported; the one peer is 'sb3'")
    suite = SUITES[name]
    if peer is not None and not suite.has_peer:
        raise ValueError(
            f"suite {name!r} has no peer: SB3 implements none of "
            f"{', '.join(dict.fromkeys(e.algo for e in suite.entries))}; "
            "run it without --peer"
        )
    # the suite's seeds, and any further ones recorded; given seeds are exactly those
    recorded_in = out_dir if seeds is None else None
    seeds = list(range(suite.seeds)) if seeds is None else check_seeds(seeds)
    frameworks = ("rlfw",) if peer is None else ("rlfw", peer)
    jobs = plan(suite, frameworks, seeds, f"benchmark-{name}" if wandb else None, recorded_in)
    if peer is not None:
        check_peer_installed()
    planned = len(plan(suite, frameworks, seeds))
    extra = len(jobs) - planned
    say(
        f"rlfw benchmark {name}: {len(suite.entries)} entries, {len(frameworks)} "
        f"framework(s), {len(seeds)} seeds: {planned} runs"
        + (f" + {extra} recorded runs of further seeds = {len(jobs)}" if extra else "")
        + f" -> {out_dir}"
    )
    done = [0]

    def report(result: Record) -> None:
        done[0] += 1
        final = result.get("final_return")
        what = (
            result.get("status", "done")
            if final is None
            else f"final {final:.1f}, {result['wall_s']:.0f} s"
            + (" (finished before)" if result.get(SKIPPED) else "")
        )
        say(
            f"[{done[0]}/{len(jobs)}] {result['framework']} {result['algo']} "
            f"{result['env']} seed {result['seed']}: {what}"
        )

    chosen = set(names if entries is None else entries)
    todo = [(j, not report_only and Entry(j.algo, j.env).name in chosen) for j in jobs]
    results = backend.map(functools.partial(_run_or_read, out_dir=out_dir), todo, report)
    if report_only and not any(r.get("final_return") is not None for r in results):
        check_no_report_lost(out_dir)
    return write_report(
        name, suite, reported(results), out_dir, baseline_runs(suite, seeds, out_dir)
    )


def _run_or_read(job: Job, run: bool, out_dir: str, cores: Sequence[int] | None = None) -> Record:
    """``run_job`` where the job is to run, else what is finished of it (``finished``)."""
    return (run_job if run else finished)(job, out_dir, cores)


def baseline_runs(suite: Suite, seeds: Sequence[int], out_dir: str) -> list[Record]:
    """The finished rlfw runs of ``suite.baseline`` (another suite's algorithm) on this
    suite's envs and budgets, from that suite's folder beside ``out_dir``."""
    if suite.baseline is None:
        return []
    other, algo = suite.baseline
    folder = os.path.join(os.path.dirname(os.path.abspath(out_dir)), other)
    envs = dict.fromkeys((e.env, e.budget) for e in suite.entries)
    jobs = [
        Job("rlfw", algo, env, steps, seed, peer_settings=SUITES[other].peer_settings)
        for env, steps in envs
        for seed in seeds
    ]
    return reported(
        [r for r in (finished(j, folder) for j in jobs) if r.get("final_return") is not None]
    )


def check_no_report_lost(out_dir: str) -> None:
    """Refuse a rebuild from no records over a report of finished runs: such a report
    predates records (or they are missing) and the rebuild would only erase it."""
    path = os.path.join(out_dir, "results.json")
    if not os.path.exists(path):
        return
    with open(path) as f:
        runs = [r for r in json.load(f).get("runs", []) if r.get("final_return") is not None]
    if runs:
        raise ValueError(
            f"--report-only: no run records under {os.path.join(out_dir, RECORDS)}"
            f", but {path} reports {len(runs)} finished run(s): a rebuild would "
            "erase them; left as it is (its runs predate records, or the records "
            "are missing)"
        )


def reported(results: Sequence[Record]) -> list[Record]:
    """``results`` as a report holds them: whether a run ran now or was read from its
    record is this invocation's news, so a rebuild writes the same report as the run that
    finished the suite."""
    return [{k: v for k, v in r.items() if k != SKIPPED} for r in results]


def check_peer_installed() -> None:
    import importlib.util

    missing = [
        m
        for m in ("stable_baselines3", "rl_zoo3", "rliable")
        if importlib.util.find_spec(m) is None
    ]
    if missing:
        raise ValueError(f"--peer sb3 needs {', '.join(missing)}: pip install -e '.[bench]'")
