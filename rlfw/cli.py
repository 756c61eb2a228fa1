"""``python -m rlfw train|eval|export|check-env|bench-sampler|sweep|benchmark``: every flag
documented in ``--help``."""

from __future__ import annotations

import argparse
import copy
import os
import sys
from typing import Any, Sequence

from rlfw.envs import env_module
from rlfw.launch.build import build_runner, default_log_dir
from rlfw.launch.config import (
    RunConfig,
    apply_overrides,
    check_read_key,
    flatten,
    schedule_for,
    set_field,
)
from rlfw.launch.flags import ALGO_FIELD, UNSET, add_config_flags, dest_of
from rlfw.launch.flags import given_flags as config_given_flags
from rlfw.launch.plugins import (
    check_named,
    import_plugins,
    load_callbacks,
    load_installed_plugins,
)
from rlfw.registry import ALGOS, SAMPLERS
from rlfw.runfolder.checkpoint import list_checkpoints
from rlfw.runfolder.claim import check_run_folder
from rlfw.runfolder.files import read_json_object
from rlfw.samplers.machinery.workers import WorkerError
from rlfw.utils.checks import NonFiniteError
from rlfw.utils.distributed import RankError, RankGroup, init_from_environment


def _train_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train an agent",
        allow_abbrev=False,
        description=(
            "Train a registered algorithm (" + ", ".join(ALGOS.names()) + "). Unset flags take its "
            "tuned preset for the env's family (classic control, continuous, MuJoCo, Atari; "
            "rlfw.launch.presets and each algorithm's registered preset). Any config field "
            "can be set with --set KEY=VALUE (e.g. --set ppo.epochs=4)."
        ),
    )
    p.add_argument("--algo", help=f"algorithm, one of {ALGOS.names()} (default ppo)")
    p.add_argument(
        "--env", help="gymnasium id, e.g. CartPole-v1 or ALE/Pong-v5 (default CartPole-v1)"
    )
    p.add_argument(
        "--config",
        metavar="FILE.json",
        help="start from a saved config.json instead of the preset; flags and --set apply on top",
    )
    p.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="set any config field, typed from the config dataclasses (repeatable), "
        "e.g. --set ppo.gamma=0.95 --set atari.sticky_action_prob=0.25; an "
        "algorithm's fields under the run's own algo (rainbow.n_step for "
        "--algo rainbow), atari.* for ALE games only",
    )
    p.add_argument(
        "--n-workers",
        type=_workers,
        help="worker processes of parallel samplers (default: usable cores), or "
        "'auto': hill-climb on measured env steps/s before training and save "
        "the choice in config.json",
    )
    p.add_argument(
        "--steps",
        type=int,
        help="total env steps (default 120k; Atari 10M); with "
        "--resume, extends the run to this many",
    )
    p.add_argument("--log-dir", help="run folder (default runs/<algo>-<env>-s<seed>-<time>)")
    p.add_argument(
        "--help-config",
        action="store_true",
        help="list every config key of the run --algo and --env pick (type, "
        "default, preset value, help) and exit",
    )
    add_config_flags(p)  # one per config field that declares a Flag
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument(
        "--callback",
        metavar="MODULE:NAME",
        action="append",
        default=[],
        help="observe the run with class NAME of MODULE, constructed without "
        "arguments (repeatable): any of on_start, on_iteration (False stops "
        "the run with a checkpoint), on_eval, on_checkpoint, on_end; see "
        "rlfw.runners.callbacks",
    )
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue the run in RUN_DIR from its newest checkpoint with its saved "
        "config (--steps and --max-restarts apply; a flag that contradicts "
        "the run is an error)",
    )
    _trust_flags(p, "resume")


def _trust_flags(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--plugin",
        metavar="MODULE",
        action="append",
        default=[],
        help="import MODULE first, e.g. one that registers your envs, samplers or "
        "algorithms (repeatable). A run folder's config.json never imports a "
        "module by itself: a run that needs one names it, and you add it here",
    )
    p.add_argument(
        "--trust-checkpoint",
        action="store_true",
        help=f"{what} from checkpoints holding pickled objects (written by rlfw "
        "before its safe format, or env state sealed by another user's key). "
        "Loading a pickle can run any code: only for run folders whose source "
        "you trust",
    )


def _workers(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a positive integer or 'auto', got {text!r}")


def _eval_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="evaluate a run's newest checkpoint",
        allow_abbrev=False,
        description="Load RUN_DIR's config and newest checkpoint, play episodes "
        "on evaluation envs and print mean ± std return.",
    )
    p.add_argument("run_dir", help="a folder written by `rlfw train`")
    p.add_argument(
        "--best",
        action="store_true",
        help="evaluate checkpoints/best.pt (highest evaluation mean) instead of the "
        "newest checkpoint",
    )
    p.add_argument("--episodes", type=int, default=10, help="episodes to play (default 10)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--sampled",
        dest="greedy",
        action="store_const",
        const=False,
        help="sample actions (dqn: eval-ε-greedy); default: as the run evaluated",
    )
    mode.add_argument(
        "--greedy", dest="greedy", action="store_const", const=True, help="greedy actions"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=12345,
        help="evaluation seed (default 12345, unlike any training seed)",
    )
    p.add_argument(
        "--video",
        action="store_true",
        help="play the episodes on one rendering env and write each as "
        "RUN_DIR/videos/episode-<k>-return-<R>.mp4 (the first also as a GIF; "
        "Atari: the full-colour screen). Extra [video]",
    )
    _trust_flags(p, "evaluate")


def _export_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write a shareable policy folder from a run",
        allow_abbrev=False,
        description=(
            "Write OUT (a new or empty folder): model.safetensors (the agent's "
            "weights only), config.json, a model card README.md with an "
            "evaluation, and replay.gif when the [video] extra is installed. "
            "Upload OUT to the Hugging Face Hub as is; `rlfw eval OUT` plays "
            "it and gets the numbers `rlfw eval RUN_DIR` gets."
        ),
    )
    p.add_argument("run_dir", help="a folder written by `rlfw train`")
    p.add_argument("out", help="the policy folder to write (new or empty)")
    p.add_argument(
        "--best",
        action="store_true",
        help="export checkpoints/best.pt (highest evaluation mean) instead of the "
        "newest checkpoint",
    )
    p.add_argument(
        "--episodes",
        type=int,
        default=10,
        help="episodes of the model card's evaluation (default 10)",
    )
    p.add_argument(
        "--seed", type=int, default=12345, help="evaluation seed (default 12345, as rlfw eval's)"
    )
    p.add_argument("--no-gif", dest="gif", action="store_false", help="leave out replay.gif")
    _trust_flags(p, "export")


def _bench_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench-sampler",
        help="env steps/s of a sampler with a random agent",
        allow_abbrev=False,
        description="Measure a sampler's env steps per second with a uniform-"
        "random agent, to pick the fastest sampler for a machine.",
    )
    p.add_argument("--env", default="ALE/Pong-v5", help="gymnasium id (default ALE/Pong-v5)")
    p.add_argument("--sampler", default="cpu", help=f"one of {SAMPLERS.names()} (default cpu)")
    p.add_argument(
        "--batch-B", "--n-envs", dest="batch_B", type=int, default=8, help="envs B (default 8)"
    )
    p.add_argument("--n-workers", type=int, help="worker processes (default: usable cores)")
    p.add_argument("--batch-T", type=int, default=64, help="steps per batch (default 64)")
    p.add_argument("--seconds", type=float, default=10.0, help="timed duration (default 10)")


def _check_env_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check-env",
        help="step an env as rlfw will and report how it maps onto rlfw",
        allow_abbrev=False,
        description="Build the env as `rlfw train --env ID` would, show how each "
        "observation leaf maps to the buffer and the model, the action distribution and "
        "the mask source, play a few random episodes and check reset(seed=) is "
        "deterministic; exit 1 with one line per problem.",
    )
    p.add_argument("env", help="gymnasium id (module:Env ids need --plugin module)")
    p.add_argument("--plugin", action="append", default=[], help="module to import first")
    p.add_argument("--episodes", type=int, default=3, help="random episodes (default 3)")
    p.add_argument("--max-steps", type=int, default=1000, help="cap per episode (default 1000)")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="env_options.* keys"
    )


def _sweep_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a grid of variants x seeds, each its own train process",
        allow_abbrev=False,  # so train flags such as --seed pass through untouched
        description="Run every grid point x seed as a separate `rlfw train` process with its "
        "own run folder under --runs-dir, at most --max-parallel at once, and "
        "print and write a summary table (summary.md/.csv/.json). Re-running "
        "skips finished variants and resumes interrupted ones. Any other flags "
        "are train flags applied to every variant, e.g. `rlfw sweep --runs-dir "
        "runs/sweep --seeds 0 1 --grid ppo.epochs=4,10 --algo ppo --steps 50000`.",
    )
    p.add_argument("--runs-dir", required=True, help="folder for the variants' run folders")
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds (default 0)")
    p.add_argument(
        "--grid",
        metavar="KEY=V1,V2",
        action="append",
        default=[],
        help="a config key and its values (repeatable; the grid is their product), "
        "e.g. --grid ppo.epochs=4,10 --grid n_envs=8,32",
    )
    p.add_argument(
        "--max-parallel",
        type=int,
        default=1,
        help="variants running at once (local: each on its own slice of the cores; default 1)",
    )
    p.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="local processes (default) or Ray tasks (extra [ray])",
    )
    p.add_argument(
        "--ray-address",
        default=None,
        help="Ray cluster to join ('auto', 'ray://head:10001'); default: start a "
        "local Ray instance",
    )
    p.add_argument(
        "--cpus-per-run",
        type=float,
        default=None,
        help="ray: CPUs each variant reserves (default 1)",
    )


def _benchmark_parser(sub: argparse._SubParsersAction) -> None:
    from rlfw.bench.suites import SUITES

    p = sub.add_parser(
        "benchmark",
        help="run a suite of (algo, env) entries over seeds, against SB3",
        allow_abbrev=False,
        description="Run every entry of a suite for several seeds with rlfw's preset (and "
        "with --peer sb3, with stable-baselines3 on rl-baselines3-zoo's settings), "
        "each run its own process on its own core, and write a report: "
        "OUT/README.md, OUT/results.json and learning curves. Re-running skips "
        "finished runs. Suites: "
        + "; ".join(f"{name}: {s.about}" for name, s in SUITES.items())
        + ".",
    )
    p.add_argument("--suite", required=True, choices=sorted(SUITES))
    p.add_argument(
        "--peer",
        choices=("sb3",),
        default=None,
        help="also run stable-baselines3 with rl-baselines3-zoo's settings",
    )
    p.add_argument(
        "--seeds", type=int, nargs="+", default=None, help="seeds (default: the suite's, 0..N-1)"
    )
    p.add_argument(
        "--out", default=None, help="report and run folders (default docs/benchmarks/SUITE)"
    )
    p.add_argument(
        "--max-parallel",
        type=int,
        default=1,
        help="runs at once (local: each pinned to its own slice of the cores)",
    )
    p.add_argument("--backend", choices=("local", "ray"), default="local")
    p.add_argument("--ray-address", default=None, help="Ray cluster to join (default: local)")
    p.add_argument(
        "--wandb",
        action="store_true",
        help="rlfw's runs also log to Weights & Biases, in the group "
        "benchmark-SUITE (extra [wandb])",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: write the report from the runs finished so far",
    )
    p.add_argument(
        "--entries",
        nargs="+",
        default=None,
        metavar="ENTRY",
        help="run only these entries (as the report names them: a2c-CartPole-v1, "
        "ppo-MinAtar_Breakout-v1); the report still covers the whole suite, the other "
        "entries from their finished runs",
    )


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlfw", description="rlfw: modular deep RL", allow_abbrev=False
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _train_parser(sub)
    _eval_parser(sub)
    _export_parser(sub)
    _bench_parser(sub)
    _sweep_parser(sub)
    _check_env_parser(sub)
    _benchmark_parser(sub)
    return parser


def cmd_benchmark(args: argparse.Namespace) -> int:
    from rlfw.bench.run import run_suite

    backend = _backend(args)
    out = args.out or os.path.join("docs", "benchmarks", args.suite)
    data = run_suite(
        args.suite,
        out,
        backend,
        peer=args.peer,
        seeds=args.seeds,
        report_only=args.report_only,
        wandb=args.wandb,
        entries=args.entries,
    )
    failed = [r for r in data["runs"] if r.get("status", "").startswith("failed")]
    print(
        f"rlfw benchmark: report in {os.path.join(out, 'README.md')}"
        + (f"; {len(failed)} run(s) failed" if failed else "")
    )
    return 1 if failed else 0


def _backend(args: argparse.Namespace):
    """The backend ``--backend`` names, with its own options (a Ray option without
    ``--backend ray`` is an error: the local backend would ignore it)."""
    from rlfw.launch.backends import LocalBackend, RayBackend

    ray_options = {
        "--ray-address": args.ray_address,
        "--cpus-per-run": getattr(args, "cpus_per_run", None),
    }
    if args.backend == "ray":
        cpus = ray_options["--cpus-per-run"]
        return RayBackend(args.ray_address, 1.0 if cpus is None else cpus, args.max_parallel)
    given = [flag for flag, value in ray_options.items() if value is not None]
    if given:
        raise ValueError(
            f"{', '.join(given)} is for --backend ray; this {args.command} runs "
            "on the local backend, which would ignore it"
        )
    return LocalBackend(args.max_parallel)


def _check_grid_against_flags(keys: Sequence[str], train_flags: Sequence[str]) -> None:
    """A grid key the train flags set too would be set twice per variant, the grid's
    value silently winning: refused, as is ``seed`` (the sweep's own: ``--seeds``)."""
    if "seed" in keys:
        raise ValueError(
            "grid key 'seed' is the sweep's own: give the seeds with --seeds (e.g. --seeds 0 1 2)"
        )
    args = make_parser().parse_args(["train", *train_flags])
    flags = {key: f"--{key}" for key in ("algo", "env") if getattr(args, key) is not None}
    if args.steps is not None:
        flags["schedule.n_steps"] = "--steps"
    for flag, key, _ in given_flags(args):
        field = key.removeprefix(ALGO_FIELD)
        flags.update(
            {f"{algo}.{field}": flag for algo in ALGOS.names()}  # whichever algo
            if key.startswith(ALGO_FIELD)
            else {key: flag}
        )
    for key in keys:
        if key in flags:
            raise ValueError(
                f"grid key {key!r} is also set by the train flags ({flags[key]}); "
                "set it in one place"
            )


def cmd_sweep(args: argparse.Namespace, train_flags: list[str]) -> int:
    from rlfw.launch.sweep import (
        Sweep,
        check_train_flags,
        expand,
        parse_grid,
        summary_table,
    )

    check_train_flags(train_flags)
    grid = parse_grid(args.grid)
    _check_grid_against_flags([key for key, _ in grid], train_flags)
    variants = expand(grid, args.seeds)
    for variant in variants:  # every variant's config is valid before anything starts
        argv = [
            "train",
            *train_flags,
            *[a for k, v in variant.settings for a in ("--set", f"{k}={v}")],
        ]
        config_from_args(make_parser().parse_args(argv)).validate()
    backend = _backend(args)
    sweep = Sweep(args.runs_dir, variants, train_flags)
    print(
        f"rlfw sweep: {len(variants)} variant(s) -> {args.runs_dir} ({args.backend}, "
        f"{args.max_parallel} at once)"
    )
    finished = [0]

    def report(outcome) -> None:
        finished[0] += 1
        evals = "" if outcome.final_eval is None else f", final eval {outcome.final_eval:.2f}"
        print(
            f"rlfw sweep: [{finished[0]}/{len(variants)}] {outcome.name}: {outcome.status}{evals}",
            flush=True,
        )

    outcomes = sweep.run(backend, report)
    print(summary_table(outcomes))
    failed = [o for o in outcomes if o.status.startswith("failed")]
    return 1 if failed else 0


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """A saved config (``--config``) or the preset for (algo, env family), then every flag
    the user set, then every ``--set``, in that order. Modules a config file's env id or
    plugins need must be named by ``--plugin``; ``--env module:Env`` names its own."""
    if args.config:
        config = _checked_config(
            read_json_object(args.config, "config file"), args.plugin, f"config file {args.config}"
        )
        if args.algo is not None or args.env is not None:
            config.algo, config.env = args.algo or config.algo, args.env or config.env
    else:
        config = RunConfig.for_env(args.env or "CartPole-v1", args.algo or "ppo")
    if args.steps is not None:
        apply_overrides(config, {"schedule": schedule_for(args.steps)})
    apply_flags(config, args)
    config.plugins = tuple(dict.fromkeys([*config.plugins, *args.plugin]))
    return config


def given_flags(args: argparse.Namespace) -> list[tuple[str, str, Any]]:
    """``(flag as typed, config key, value)`` of every flag the user set (except --algo,
    --env and --steps), in the order they apply, ``--set`` last; a field of whichever
    algorithm runs is keyed ``ALGO_FIELD + field``."""
    given = config_given_flags(args)
    if args.n_workers is not None:
        given.append(("--n-workers", "n_workers", args.n_workers))
    for assignment in args.set:
        key, sep, value = assignment.partition("=")
        if not sep:
            raise ValueError(f"--set takes KEY=VALUE, got {assignment!r}")
        given.append((f"--set {assignment}", key.strip(), value.strip()))
    return given


def apply_flags(config: RunConfig, args: argparse.Namespace) -> None:
    """Every flag the user set (except --steps), then every ``--set``."""
    keys = []
    for flag, key, value in given_flags(args):
        if key == "n_workers" and value == "auto":
            config.n_workers, config.tune_workers = None, True  # validate() checks the sampler
            continue
        if key.startswith(ALGO_FIELD):
            field = key.removeprefix(ALGO_FIELD)
            if not hasattr(config.algo_config(), field):
                raise ValueError(
                    f"{flag} sets {field}, which algo {config.algo!r} does not "
                    f"have; algorithms with it: {_algos_with(field)}"
                )
            key = f"{config.algo}.{field}"
        set_field(config, key, value)
        if key == "n_workers" or flag.startswith("--set "):
            keys.append(key)
    for key in keys:  # once all are set: `--set algo=...` may follow its own keys
        check_read_key(config, key)


def _algos_with(field: str) -> str:
    return ", ".join(a.name for a in ALGOS if hasattr(a.config_cls(), field)) or "none"


def _plugins_of_command_line(args: argparse.Namespace) -> list[str]:
    """Modules the user's own command line names: ``--plugin``s, and ``--env module:Env``."""
    own_env = env_module(args.env) if getattr(args, "env", None) else None
    return list(dict.fromkeys([*args.plugin, *([own_env] if own_env else [])]))


def _chosen_modules(args: argparse.Namespace) -> list[str]:
    """The command line's modules, imported, plus the installed ``rlfw.plugins`` (loaded):
    every module the user chose, and so may run."""
    named = _plugins_of_command_line(args)
    import_plugins(named)
    return list(dict.fromkeys([*named, *load_installed_plugins()]))


def cmd_train(args: argparse.Namespace) -> int:
    args.plugin = _chosen_modules(args)
    if args.help_config:
        return _help_config(args)
    args.callbacks = load_callbacks(args.callback)
    resume_dir = args.resume or _elastic_resume_dir(args)
    if resume_dir:
        config = resume_config(args, resume_dir)
        log_dir = resume_dir
    else:
        config = config_from_args(args)
        config.validate()
        log_dir = args.log_dir or default_log_dir(config)
    ranks = init_from_environment(config.device)
    code = None
    try:
        code = _train(args, config, log_dir, bool(resume_dir), ranks)
        return code
    finally:
        if ranks is not None:
            ranks.close(finished=code == 0)


def _help_config(args: argparse.Namespace) -> int:
    """``--help-config``: the keys of the run --algo and --env pick; nothing is trained."""
    from rlfw.launch.reference import help_config

    algo, env = args.algo or "ppo", args.env or "CartPole-v1"
    ALGOS.get(algo)  # an unknown algorithm: one line naming the known ones
    RunConfig(env=env).env_factory().validate()
    print(help_config(algo, env))
    return 0


def resume_config(args: argparse.Namespace, run_dir: str) -> RunConfig:
    """The run's saved config (``--steps`` extends it, ``--max-restarts`` applies); a
    contradicting flag is an error naming it, and modules the run needs must be named."""
    config = saved_config(run_dir, args.trust_checkpoint, args.plugin)
    if args.log_dir is not None and os.path.abspath(args.log_dir) != os.path.abspath(run_dir):
        raise ValueError(
            f"--log-dir {args.log_dir} contradicts --resume {run_dir}: a resumed "
            "run continues in its own folder"
        )
    if args.config:
        raise ValueError(
            f"--config {args.config} with --resume {run_dir}: a resumed run keeps "
            f"its own config; to start a new run from it, use --config "
            f"{os.path.join(run_dir, 'config.json')} without --resume"
        )
    if args.steps is not None:  # extend (or shorten) the run; cadence stays as saved
        set_field(config, "schedule.n_steps", args.steps)
    max_restarts = getattr(args, dest_of("schedule.max_restarts"))
    if max_restarts is not UNSET:
        set_field(config, "schedule.max_restarts", max_restarts)
    asked = copy.deepcopy(config)
    if args.algo is not None:
        asked.algo = args.algo
    if args.env is not None:
        asked.env = args.env
    apply_flags(asked, args)
    config.wandb = asked.wandb
    given, saved = dict(flatten(asked.to_dict())), dict(flatten(config.to_dict()))
    # where the run is logged may change (W&B); what it computes may not
    changed = [k for k in given if given[k] != saved.get(k) and not k.startswith("wandb.")]
    if changed:
        listed = ", ".join(f"{k}={given[k]!r} (the run has {saved.get(k)!r})" for k in changed)
        saved_file = os.path.join(run_dir, "config.json")
        raise ValueError(
            f"--resume {run_dir}: {listed} contradicts the run; a resumed run "
            "keeps its settings (--steps extends it): drop the flag, or start a "
            f"new run from its config (--config {saved_file})"
        )
    return config


def saved_config(run_dir: str, trust: bool = False, named: Sequence[str] = ()) -> RunConfig:
    """``config.json``; when it is missing or unreadable, the newest checkpoint's copy (with
    a warning naming both). The modules the run needs must be in ``named`` (checked before
    the config is read: its keys may belong to a plugin's algorithm)."""
    source = f"run {run_dir}"
    path = os.path.join(run_dir, "config.json")
    try:
        if not os.path.exists(path):
            raise FileNotFoundError(f"{run_dir!r} is not a run folder: no config.json in it")
        data = read_json_object(path, "config file")
    except (OSError, ValueError) as err:
        problem = str(err).splitlines()[0]
    else:
        return _checked_config(data, named, source)
    from rlfw.runfolder.checkpoint import load_newest_valid

    try:
        path, state, _ = load_newest_valid(run_dir, "trust" if trust else "drop")
    except (FileNotFoundError, RuntimeError):
        raise ValueError(
            f"no run config for {run_dir}: {problem}, and no checkpoint holds one either"
        ) from None
    print(f"rlfw: warning: {problem}; using the config saved in {path}", file=sys.stderr)
    return _checked_config(state["config"], named, source)


def _checked_config(data: dict, named: Sequence[str], source: str) -> RunConfig:
    """The config in ``data`` once the modules it needs are known to be named."""
    # read as the config will read it (text is a comma list), so no spelling slips past
    plugins = RunConfig.from_dict({"plugins": data.get("plugins", ())}).plugins
    check_named(str(data.get("env", RunConfig.env)), plugins, named, source)
    return RunConfig.from_dict(data)


def _train(
    args: argparse.Namespace, config: RunConfig, log_dir: str, resume: bool, ranks: RankGroup | None
) -> int:
    if ranks is not None:  # rank 0's config and run folder (its timestamp) for every rank
        saved, log_dir = ranks.broadcast((config.to_dict(), log_dir), "the run config")
        config = RunConfig.from_dict(saved)
    chief = ranks is None or ranks.is_chief
    where = "" if ranks is None else f"rank {ranks.rank}: "
    runner = None
    try:
        runner = build_runner(
            config,
            log_dir,
            resume=resume,
            progress=not args.no_progress,
            ranks=ranks,
            trust_checkpoint=args.trust_checkpoint,
            callbacks=args.callbacks,
        )
        if chief:
            _say_what_runs(config, log_dir, ranks)
        with runner:
            result = runner.train()
    except ValueError as err:
        if runner is None:  # refused while building: nothing was written
            raise
        print(f"rlfw: error: {where}{err}", file=sys.stderr)  # e.g. W&B would not start
        if chief:
            print(f"rlfw: {_checkpoint_note(log_dir)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C while starting (the loop itself returns normally)
        print(
            f"rlfw: {where}interrupted while starting"
            + (f"; {_checkpoint_note(log_dir)}" if chief else ""),
            file=sys.stderr,
        )
        return 130
    except OSError as err:  # a full disk, a read-only folder, ...
        print(f"rlfw: error: {where}{_os_error(err)}", file=sys.stderr)
        if chief:
            print(f"rlfw: {_checkpoint_note(log_dir)}", file=sys.stderr)
        return 1
    except (WorkerError, NonFiniteError, RankError) as err:
        first, _, details = str(err).partition("\n")
        named = where if not isinstance(err, RankError) else ""  # it names its rank
        print(f"rlfw: error: {named}{first}", file=sys.stderr)
        if details.strip():
            print(details.rstrip(), file=sys.stderr)
        if chief:
            print(f"rlfw: {_checkpoint_note(log_dir)}", file=sys.stderr)
        return 1
    if not chief:
        return 130 if result.interrupted else 0
    status = "interrupted" if result.interrupted else "done"
    evals = result.evals()
    restarts = f"; {result.restarts} sampler restart(s)" if result.restarts else ""
    if result.stopped_by is not None:
        status = f"stopped by callback {result.stopped_by}"
    print(
        f"rlfw: {status} after {result.env_steps} env steps; {evals}{restarts}; run folder "
        f"{log_dir}"
    )
    return 130 if result.interrupted else 0


def _say_what_runs(config: RunConfig, log_dir: str, ranks: RankGroup | None) -> None:
    batch = f"{config.batch_B} envs x {config.batch_T} steps"
    if ranks is not None:
        batch = (
            f"{ranks.world_size} ranks x {batch} = global batch "
            f"{ranks.world_size * config.batch_B * config.batch_T} ({ranks.backend})"
        )
    print(
        f"rlfw: {config.algo} on {config.env}, sampler {config.sampler}, runner "
        f"{config.runner}, {batch}, {config.schedule.n_steps} steps -> {log_dir}"
    )


def _os_error(err: OSError) -> str:
    """One line: what failed, on which file."""
    what = err.strerror or str(err)
    return f"{what}: {err.filename}" if err.filename else what


def _elastic_resume_dir(args: argparse.Namespace) -> str | None:
    """After torchrun restarted the ranks (``--max-restarts``), continue the run in
    ``--log-dir`` from its newest checkpoint instead of starting over."""
    restarted = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0
    if restarted and args.log_dir and list_checkpoints(args.log_dir):
        return args.log_dir
    return None


def _checkpoint_note(log_dir: str) -> str:
    """What the run folder holds for the user's next step: a checkpoint to resume, or, if
    none was written, how to start again (a fresh run refuses a folder holding a run)."""
    try:
        found = list_checkpoints(log_dir)
    except OSError:
        found = []
    if found:
        return (
            f"newest checkpoint {found[-1]}; resume with: python -m rlfw train --resume {log_dir}"
        )
    try:
        check_run_folder(log_dir, resume=False)
    except (ValueError, OSError):
        saved = os.path.join(log_dir, "config.json")
        fresh = (
            f"in a new folder (python -m rlfw train --config {saved} --log-dir NEW_DIR), or "
            if os.path.isfile(saved)
            else ""
        )
        return (
            f"no checkpoint was written in {log_dir}, so there is nothing to resume; "
            f"start the run again {fresh}delete {log_dir} and run the same command"
        )
    return f"no checkpoint was written in {log_dir}; the same command starts the run again"


def cmd_eval(args: argparse.Namespace) -> int:
    import numpy as np

    from rlfw.launch.evaluate import evaluate_episodes

    args.plugin = _chosen_modules(args)
    config = saved_config(args.run_dir, args.trust_checkpoint, args.plugin)
    config.env_factory().validate()  # the check `train --env` makes, before anything is built
    videos = os.path.join(args.run_dir, "videos") if args.video else None
    episodes = evaluate_episodes(
        args.run_dir,
        args.episodes,
        greedy=args.greedy,
        seed=args.seed,
        best=args.best,
        trust=args.trust_checkpoint,
        config=config,
        video_dir=videos,
    )
    returns = np.array([e.ret for e in episodes])
    if videos is not None:
        print(f"rlfw: videos of {len(returns)} episode(s) in {videos}")
    successes = [e.success for e in episodes if e.success is not None]
    success = f", success rate {np.mean(successes):.2f}" if successes else ""
    print(
        f"{args.run_dir}: mean return {returns.mean():.2f} ± {returns.std():.2f} over "
        f"{len(returns)} episodes{success}"
    )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from rlfw.launch.export import check_export_target, export_policy

    check_export_target(args.out)  # before anything is read or played
    args.plugin = _chosen_modules(args)
    config = saved_config(args.run_dir, args.trust_checkpoint, args.plugin)
    config.env_factory().validate()
    done = export_policy(
        args.run_dir,
        args.out,
        config,
        best=args.best,
        trust=args.trust_checkpoint,
        episodes=args.episodes,
        seed=args.seed,
        gif=args.gif,
    )
    print(
        f"rlfw: exported {done.source} to {done.out}: mean return {done.returns.mean():.2f} "
        f"± {done.returns.std():.2f} over {len(done.returns)} episodes"
        + (
            ""
            if done.gif
            else " (no replay.gif: "
            + ("--no-gif)" if not args.gif else "the [video] extra is not installed)")
        )
    )
    return 0


def cmd_check_env(args: argparse.Namespace) -> int:
    from rlfw.launch.check_env import check_env

    config = RunConfig(env=args.env)
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.startswith("env_options."):
            raise ValueError(f"check-env --set takes env_options.KEY=VALUE, got {item!r}")
        set_field(config, key, value)
    report = check_env(config.env_factory(), args.episodes, args.max_steps)
    print("\n".join(report.lines))
    for problem in report.problems:
        print(f"problem: {problem}")
    print(
        "rlfw: check-env: ok"
        if report.ok
        else f"rlfw: check-env: {len(report.problems)} problem(s)"
    )
    return 0 if report.ok else 1


def cmd_bench_sampler(args: argparse.Namespace) -> int:
    from rlfw.agents.random_agent import RandomAgent
    from rlfw.envs import EnvSpaces
    from rlfw.launch.build import build_sampler
    from rlfw.samplers.machinery.throughput import measure_steps_per_second

    if args.seconds <= 0:
        raise ValueError(f"--seconds must be > 0, got {args.seconds}")
    config = RunConfig(
        env=args.env,
        sampler=args.sampler,
        batch_B=args.batch_B,
        batch_T=args.batch_T,
        n_workers=args.n_workers,
    )
    if args.n_workers is not None:
        check_read_key(config, "n_workers")
    config.validate()
    env_factory = config.env_factory()
    agent = RandomAgent(EnvSpaces.of(env_factory).action)
    sampler = build_sampler(config, env_factory)
    workers = getattr(sampler, "n_workers", None) or args.n_workers or "default"
    shape = (
        f"{args.batch_B} envs, {workers} workers"
        if SAMPLERS.get(args.sampler).has_workers
        else f"{args.batch_B} envs in this process"
    )
    rate = measure_steps_per_second(sampler, agent, args.seconds)
    print(
        f"{args.sampler} sampler on {args.env}: {rate:,.0f} env steps/s ({shape}, T={args.batch_T})"
    )
    return 0


def _import_plugins_first(argv: Sequence[str]) -> None:
    """The modules the command line names with ``--plugin``, and the installed plugins, are
    imported before the parser is made, so the flags their settings declare are there."""
    named = [value for flag, value in zip(argv, argv[1:]) if flag == "--plugin"]
    named += [a.split("=", 1)[1] for a in argv if a.startswith("--plugin=")]
    import_plugins(named)
    load_installed_plugins()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        _import_plugins_first(argv)
    except ValueError as err:
        print(f"rlfw: error: {err}", file=sys.stderr)
        return 2
    parser = make_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "sweep":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if args.command == "sweep":
            return cmd_sweep(args, [a for a in extra if a != "--"])
        if args.command == "train":
            return cmd_train(args)
        if args.command == "bench-sampler":
            return cmd_bench_sampler(args)
        if args.command == "benchmark":
            return cmd_benchmark(args)
        if args.command == "export":
            return cmd_export(args)
        if args.command == "check-env":
            return cmd_check_env(args)
        return cmd_eval(args)
    except (ValueError, FileNotFoundError) as err:
        parser.exit(2, f"rlfw: error: {err}\n")
    except RuntimeError as err:  # e.g. no checkpoint in the folder loads
        parser.exit(1, f"rlfw: error: {err}\n")
    except OSError as err:  # a full disk, a read-only or non-directory folder, ...
        parser.exit(1, f"rlfw: error: {_os_error(err)}\n")
    except KeyboardInterrupt:
        parser.exit(130, "rlfw: interrupted\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
