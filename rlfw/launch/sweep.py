"""Grid sweeps: every (grid point x seed) is one ``rlfw train`` process with its own run
folder, queued over this machine's cores (``LocalBackend``) or a Ray cluster's
(``RayBackend``), summarized in one table.

A variant's folder records how its process ended (``sweep.json``): a re-run skips the
variants that finished, resumes the ones stopped midway from their newest checkpoint, and
runs the rest. A failed variant stays in the table with the last lines of its log.
"""

from __future__ import annotations

import csv
import functools
import itertools
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import IO, Any, Callable, Sequence

from rlfw.launch.backends import Backend, job_process_setup
from rlfw.launch.config import RunConfig, config_keys, set_field
from rlfw.runfolder.checkpoint import list_checkpoints
from rlfw.runfolder.claim import RUN_FILES
from rlfw.runfolder.files import write_atomically, write_json, write_text
from rlfw.utils.checks import check_seeds


def __getattr__(name: str) -> Any:
    # The backends moved to rlfw.launch.backends (they run any task, not only sweeps).
    if name in ("LocalBackend", "RayBackend"):
        import warnings

        from rlfw.launch import backends

        warnings.warn(
            f"rlfw.launch.sweep.{name} moved to rlfw.launch.backends.{name}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(backends, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


ALIASES = {"n_envs": "batch_B"}  # the CLI's names for config keys
OWNED_FLAGS = ("--log-dir", "--resume", "--seed", "--config")  # set per variant by the sweep
STATUS_FILE, LOG_FILE = "sweep.json", "train.log"
LOG_TAIL_LINES = 15


@dataclass(frozen=True)
class Variant:
    """One run of the sweep: a grid point and a seed."""

    settings: tuple[tuple[str, str], ...]  # (config key, value as text), in grid order
    seed: int

    @property
    def name(self) -> str:
        """Folder name: ``ppo.epochs=4,batch_B=8,seed=0`` made file-system safe."""
        parts = [f"{k}={v}" for k, v in self.settings] + [f"seed={self.seed}"]
        return re.sub(r"[^A-Za-z0-9_.=,+-]+", "_", ",".join(parts))

    def train_argv(self, run_dir: str, train_flags: Sequence[str]) -> list[str]:
        """``rlfw train`` arguments: a fresh run, or a resume of one stopped midway."""
        if list_checkpoints(run_dir):
            return ["train", "--resume", run_dir, "--no-progress"]
        sets = [arg for k, v in self.settings for arg in ("--set", f"{k}={v}")]
        return [
            "train",
            *train_flags,
            *sets,
            "--seed",
            str(self.seed),
            "--log-dir",
            run_dir,
            "--no-progress",
        ]


@dataclass
class Outcome:
    """A variant's row in the summary."""

    name: str
    status: str  # 'done', 'failed (exit N)', 'interrupted', 'skipped (done)'
    final_eval: float | None = None  # the last evaluation's mean return
    best_eval: float | None = None
    steps_per_s: float | None = None
    wall_s: float | None = None
    env_steps: int | None = None
    log_tail: str = ""
    settings: dict[str, str] = field(default_factory=dict)
    seed: int = 0


def parse_grid(items: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``["ppo.epochs=4,10", "n_envs=8,32"]`` -> ``[("ppo.epochs", ["4", "10"]), ...]``,
    each key a config field and each value valid for it, checked before anything runs."""
    grid: list[tuple[str, list[str]]] = []
    valid = config_keys()
    for item in items:
        key, sep, values = item.partition("=")
        key = ALIASES.get(key.strip(), key.strip())
        if not sep or not values.strip():
            raise ValueError(f"--grid takes KEY=V1,V2,..., got {item!r}")
        if key not in valid:
            raise ValueError(
                f"grid key {key!r} is not a config field; valid keys: {', '.join(valid)}"
            )
        if key in dict(grid):
            raise ValueError(
                f"grid key {key!r} is given twice; list all its values in one --grid {key}=V1,V2"
            )
        # commas inside brackets are a tuple value's: hidden=[64,64],[256,256]
        choices = [v.strip() for v in re.split(r",(?![^\[]*\])", values) if v.strip()]
        if len(set(choices)) < len(choices):
            raise ValueError(f"grid key {key!r} repeats a value: {choices}")
        for value in choices:
            set_field(RunConfig(), key, value)  # a bad value names the key and the type
        grid.append((key, choices))
    return grid


def expand(grid: Sequence[tuple[str, list[str]]], seeds: Sequence[int]) -> list[Variant]:
    """Every grid point x seed, in a stable order (seeds innermost)."""
    check_seeds(seeds)
    keys = [k for k, _ in grid]
    points = itertools.product(*(values for _, values in grid))
    return [Variant(tuple(zip(keys, point)), seed) for point in points for seed in seeds]


def check_train_flags(train_flags: Sequence[str]) -> None:
    # A prefix counts too (--res): a parser that took abbreviations would read it as --resume.
    owned = [
        f
        for f in train_flags
        if f.startswith("--")
        and len(f.split("=")[0]) > 2
        and any(o.startswith(f.split("=")[0]) for o in OWNED_FLAGS)
    ]
    if owned:
        raise ValueError(
            f"the sweep sets {', '.join(OWNED_FLAGS)} per variant; remove "
            f"{', '.join(owned)} from the train flags"
        )


def read_outcome(variant: Variant, run_dir: str) -> Outcome:
    """A variant's row from its folder: ``sweep.json`` and ``progress.csv``."""
    out = Outcome(variant.name, "not run", settings=dict(variant.settings), seed=variant.seed)
    status_path = os.path.join(run_dir, STATUS_FILE)
    if os.path.exists(status_path):
        with open(status_path) as f:
            saved = json.load(f)
        out.status, out.wall_s = saved["status"], saved.get("wall_s")
    progress = os.path.join(run_dir, "progress.csv")
    if os.path.exists(progress):
        with open(progress, newline="") as f:
            rows = list(csv.DictReader(f))
        evals = [float(r["eval/return_mean"]) for r in rows if r.get("eval/return_mean")]
        rates = [float(r["time/steps_per_second"]) for r in rows if r.get("time/steps_per_second")]
        if evals:
            out.final_eval, out.best_eval = evals[-1], max(evals)
        if rates:
            out.steps_per_s = sum(rates) / len(rates)
        if rows:
            out.env_steps = int(float(rows[-1]["step"]))
    if out.status.startswith("failed"):
        out.log_tail = log_tail(os.path.join(run_dir, LOG_FILE))
    return out


def log_tail(path: str, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


def _set_aside_failed_attempt(run_dir: str) -> None:
    """A variant that ended before its first checkpoint starts afresh; ``rlfw train`` refuses
    a folder holding a run's files, so the sweep moves its own earlier attempt's into
    ``previous-attempt/`` (replacing an older one there)."""
    if not os.path.exists(os.path.join(run_dir, STATUS_FILE)):
        return  # not a folder this sweep ran before
    aside = os.path.join(run_dir, "previous-attempt")
    for name in os.listdir(run_dir):
        if name in RUN_FILES or name.startswith("events.out.tfevents."):
            os.makedirs(aside, exist_ok=True)
            os.replace(os.path.join(run_dir, name), os.path.join(aside, name))


def run_variant(
    variant: Variant, run_dir: str, train_flags: Sequence[str], cores: Sequence[int] | None = None
) -> Outcome:
    """Run one variant to the end in a child ``rlfw train`` process (on ``cores`` if
    given), its output in ``train.log``; record how it ended in ``sweep.json``."""
    os.makedirs(run_dir, exist_ok=True)
    if not list_checkpoints(run_dir):
        _set_aside_failed_attempt(run_dir)
    argv = [sys.executable, "-m", "rlfw", *variant.train_argv(run_dir, train_flags)]
    started = time.perf_counter()
    with open(os.path.join(run_dir, LOG_FILE), "a") as log:
        log.write(f"$ {' '.join(argv)}\n")
        log.flush()
        code = subprocess.call(
            argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=job_process_setup(cores)
        )
    status = {0: "done", 130: "interrupted"}.get(code, f"failed (exit {code})")
    write_json(
        os.path.join(run_dir, STATUS_FILE),
        {
            "status": status,
            "returncode": code,
            "argv": argv,
            "wall_s": time.perf_counter() - started,
        },
    )
    return read_outcome(variant, run_dir)


@dataclass
class Sweep:
    runs_dir: str
    variants: list[Variant]
    train_flags: list[str]

    def run(
        self, backend: Backend, report: Callable[[Outcome], None] = lambda o: None
    ) -> list[Outcome]:
        """Run what is not finished yet; every variant gets a row (finished ones are read
        back); writes ``summary.md``, ``summary.csv`` and ``summary.json`` in runs_dir."""
        os.makedirs(self.runs_dir, exist_ok=True)
        rows: dict[str, Outcome] = {}
        jobs = []
        for variant in self.variants:
            run_dir = os.path.join(self.runs_dir, variant.name)
            before = read_outcome(variant, run_dir)
            if before.status == "done":
                before.status = "skipped (done)"
                rows[variant.name] = before
                report(before)
            else:
                jobs.append((variant, run_dir))
        task = functools.partial(run_variant, train_flags=self.flags_with_wandb_group())
        for outcome in backend.map(task, jobs, report):
            rows[outcome.name] = outcome
        outcomes = [rows[v.name] for v in self.variants]
        self.write_summary(outcomes)
        return outcomes

    def flags_with_wandb_group(self) -> list[str]:
        """The train flags; with ``--wandb``, every variant's W&B run in one group named
        after the sweep's folder unless the flags set one."""
        flags = list(self.train_flags)
        if "--wandb" in flags and not any(f.startswith("wandb.group=") for f in flags):
            flags += ["--set", f"wandb.group={os.path.basename(os.path.abspath(self.runs_dir))}"]
        return flags

    def write_summary(self, outcomes: list[Outcome]) -> None:
        write_text(os.path.join(self.runs_dir, "summary.md"), summary_table(outcomes) + "\n")
        write_json(os.path.join(self.runs_dir, "summary.json"), [asdict(o) for o in outcomes])
        columns = [
            "name",
            "status",
            "final_eval",
            "best_eval",
            "steps_per_s",
            "wall_s",
            "env_steps",
            "seed",
        ]

        def write_csv(f: IO[str]) -> None:
            writer = csv.writer(f)
            writer.writerow(columns)
            for o in outcomes:
                writer.writerow([getattr(o, c) for c in columns])

        write_atomically(os.path.join(self.runs_dir, "summary.csv"), write_csv, binary=False)


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def summary_table(outcomes: list[Outcome]) -> str:
    """A markdown table, one row per variant, then the log tail of each failed one."""
    lines = [
        "| variant | status | final eval | best eval | env steps/s | wall s | env steps |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for o in outcomes:
        lines.append(
            f"| {o.name} | {o.status} | {_fmt(o.final_eval, '.2f')} | "
            f"{_fmt(o.best_eval, '.2f')} | {_fmt(o.steps_per_s, ',.0f')} | "
            f"{_fmt(o.wall_s, '.1f')} | {_fmt(o.env_steps, 'd')} |"
        )
    for o in outcomes:
        if o.log_tail:
            lines += [
                "",
                f"{o.name} {o.status}; last lines of its log:",
                "```",
                o.log_tail.rstrip(),
                "```",
            ]
    return "\n".join(lines)
