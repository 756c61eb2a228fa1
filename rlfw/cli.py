"""``python -m rlfw train|eval|export|check-env|bench-sampler|sweep|benchmark``: every flag
documented in ``--help``."""

from __future__ import annotations

import argparse
import copy
import os
import sys
from typing import TYPE_CHECKING, Any, Sequence

from rlfw.envs import env_module
from rlfw.launch.build import build_runner, default_log_dir
from rlfw.launch.commands import (
    BenchmarkOptions,
    BenchSamplerOptions,
    CheckEnvOptions,
    EvalOptions,
    ExportOptions,
    ManyRunsOptions,
    OverrideOptions,
    PolicyEvalOptions,
    SweepOptions,
    TrainOptions,
    TrustOptions,
    TuneOptions,
)
from rlfw.launch.config import (
    RunConfig,
    apply_overrides,
    check_read_key,
    flatten,
    schedule_for,
    set_field,
)
from rlfw.launch.flags import (
    ALGO_FIELD,
    add_config_flags,
    add_options,
    given_value,
)
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
from rlfw.utils.checks import NonFiniteError, check_positive
from rlfw.utils.distributed import RankError, RankGroup, init_from_environment

if TYPE_CHECKING:
    from rlfw.launch.backends import Backend


def _command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    description: str,
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=summary, description=description, allow_abbrev=False
    )
    return parser


def _train_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _command(
        sub,
        "train",
        "train an agent",
        "Train a registered algorithm (" + ", ".join(ALGOS.names()) + "). Unset flags take "
        "its tuned preset for the env's family (classic control, continuous, MuJoCo, Atari; "
        "rlfw.launch.presets and each algorithm's spec). Any config key can be set with "
        "--set KEY=VALUE (e.g. --set ppo.epochs=4).",
    )
    add_config_flags(p)  # one per config field that declares a Flag
    add_options(p, TrainOptions)
    add_options(p, OverrideOptions)
    add_options(p, TrustOptions)


def _eval_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _command(
        sub,
        "eval",
        "evaluate a run's newest checkpoint",
        "Load RUN_DIR's config and newest checkpoint, play episodes on evaluation envs and "
        "print mean ± std return.",
    )
    p.add_argument("run_dir", help="a folder written by `rlfw train`")
    add_options(p, PolicyEvalOptions)
    add_options(p, EvalOptions)
    add_options(p, TrustOptions)


def _export_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _command(
        sub,
        "export",
        "write a shareable policy folder from a run",
        "Write OUT (a new or empty folder): model.safetensors (the agent's weights only), "
        "config.json, a model card README.md with an evaluation, and replay.gif when the "
        "[video] extra is installed; with --onnx, policy.onnx for onnxruntime. Upload OUT to "
        "the Hugging Face Hub as is; `rlfw eval OUT` plays it and gets the numbers `rlfw "
        "eval RUN_DIR` gets.",
    )
    p.add_argument("run_dir", help="a folder written by `rlfw train`")
    p.add_argument("out", help="the policy folder to write (new or empty)")
    add_options(p, PolicyEvalOptions)
    add_options(p, ExportOptions)
    add_options(p, TrustOptions)


# The config flags bench-sampler takes: train's, so their names, help and defaults agree.
BENCH_SAMPLER_KEYS = ("env", "sampler", "batch_B", "batch_T", "n_workers")


def _bench_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _command(
        sub,
        "bench-sampler",
        "env steps/s of a sampler with a random agent",
        "Measure a sampler's env steps per second with a uniform-random agent, to pick the "
        "fastest sampler for a machine. The sizes are those `rlfw train` would use for the "
        "env (its PPO preset) unless given.",
    )
    add_config_flags(p, BENCH_SAMPLER_KEYS)
    add_options(p, BenchSamplerOptions)
    add_options(p, TrustOptions, only=("plugin",))


def _check_env_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _command(
        sub,
        "check-env",
        "step an env as rlfw will and report how it maps onto rlfw",
        "Build the env as `rlfw train --env ID` would, show how each observation leaf maps "
        "to the buffer and the model, the action distribution and the mask source, play a "
        "few random episodes and check reset(seed=) is deterministic; exit 1 with one line "
        "per problem. --set takes env_options.* keys.",
    )
    p.add_argument("env", help="gymnasium id (module:Env ids need --plugin module)")
    add_options(p, CheckEnvOptions)
    add_options(p, OverrideOptions)
    add_options(p, TrustOptions, only=("plugin",))


def _sweep_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _command(
        sub,
        "sweep",
        "run a grid of variants x seeds, each its own train process",
        "Run every grid point x seed as a separate `rlfw train` process with its own run "
        "folder under --runs-dir, at most --max-parallel at once, and print and write a "
        "summary table (summary.md/.csv/.json). Re-running skips finished variants and "
        "resumes interrupted ones. Any other flags are train flags applied to every "
        "variant, e.g. `rlfw sweep --runs-dir runs/sweep --seeds 0 1 --grid "
        "ppo.epochs=4,10 --algo ppo --steps 50000`.",
    )
    add_options(p, SweepOptions)
    add_options(p, ManyRunsOptions)


def _benchmark_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from rlfw.bench.suites import SUITES

    p = _command(
        sub,
        "benchmark",
        "run a suite of (algo, env) entries over seeds, against SB3",
        "Run every entry of a suite for several seeds with rlfw's preset (and with --peer "
        "sb3, with stable-baselines3 on rl-baselines3-zoo's settings), each run its own "
        "process on its own core, and write a report: OUT/README.md, OUT/results.json and "
        "learning curves. Re-running skips finished runs. Suites: "
        + "; ".join(f"{name}: {s.about}" for name, s in SUITES.items())
        + ".",
    )
    add_options(p, BenchmarkOptions)
    add_options(p, ManyRunsOptions)
    add_config_flags(p, ("wandb.enabled",))  # rlfw's runs log to W&B, group benchmark-SUITE


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
    _tune_parser(sub)
    return parser


def _tune_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = _command(
        sub,
        "tune",
        "search an algorithm's settings for an env with Optuna",
        "Run an Optuna study (TPE, a median pruner on each trial's evaluations, the last "
        "evaluation's mean return as the objective) over the algorithm's declared search "
        "space, each trial an rlfw run in STUDY/trials/. Run the same command again to "
        "continue a study that was stopped. Writes STUDY/README.md (the best trial as a "
        "command line and a preset snippet, the top trials) and Optuna's plots.",
    )
    add_config_flags(p, ("algo", "env"))
    add_options(p, TuneOptions)
    add_options(p, OverrideOptions)
    add_options(p, TrustOptions, only=("plugin",))


def cmd_tune(args: argparse.Namespace) -> int:
    from rlfw.algos.search_space import parse_param
    from rlfw.launch.tune import REPORT, TuneSettings, run_study, search_space

    algo = given_value(args, "algo") or RunConfig.algo
    env = given_value(args, "env") or RunConfig.env
    RunConfig(algo=algo, env=env).env_factory().validate()
    check_positive(trials=args.trials, steps=args.steps, jobs=args.jobs)
    check_positive(evaluations=args.evaluations, eval_episodes=args.eval_episodes)
    settings = TuneSettings(
        algo,
        env,
        args.trials,
        args.steps,
        args.study or os.path.join("studies", f"{algo}-{env.replace('/', '_')}"),
        jobs=args.jobs,
        storage=args.storage,
        seed=args.seed,
        evaluations=args.evaluations,
        eval_episodes=args.eval_episodes,
        space=search_space(algo, [parse_param(text) for text in args.space]),
        fixed=tuple(_assignment(text) for text in args.set),
    )
    run_study(settings)  # writes the report
    print(f"rlfw: study {settings.study_dir}: {os.path.join(settings.study_dir, REPORT)}")
    return 0


def _assignment(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as ``(key, value text)``; ``ValueError`` naming it otherwise."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--set takes KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def cmd_benchmark(args: argparse.Namespace) -> int:
    from rlfw.bench.run import run_suite
    from rlfw.bench.suites import SUITES

    if args.suite not in SUITES:
        raise ValueError(f"--suite {args.suite!r} unknown; choose from {sorted(SUITES)}")
    backend = _backend(args)
    out = args.out or os.path.join("docs", "benchmarks", args.suite)
    data = run_suite(
        args.suite,
        out,
        backend,
        peer=args.peer,
        seeds=args.seeds,
        report_only=args.report_only,
        wandb=bool(given_value(args, "wandb.enabled")),
        entries=args.entries,
    )
    failed = [r for r in data["runs"] if r.get("status", "").startswith("failed")]
    print(
        f"rlfw benchmark: report in {os.path.join(out, 'README.md')}"
        + (f"; {len(failed)} run(s) failed" if failed else "")
    )
    return 1 if failed else 0


def _backend(args: argparse.Namespace) -> Backend:
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
    flags = {}
    for flag, key, _ in [*config_given_flags(args), *given_flags(args)]:
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
        Outcome,
        Sweep,
        check_train_flags,
        expand,
        parse_grid,
        summary_table,
    )

    check_train_flags(train_flags)
    grid = parse_grid(args.grid)
    _check_grid_against_flags([key for key, _ in grid], train_flags)
    variants = expand(grid, args.seeds or [0])
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

    def report(outcome: Outcome) -> None:
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
        config.algo = _preset_choice(args, "algo") or config.algo
        config.env = _preset_choice(args, "env") or config.env
    else:
        config = RunConfig.for_env(
            _preset_choice(args, "env") or RunConfig.env,
            _preset_choice(args, "algo") or RunConfig.algo,
        )
    steps = given_value(args, "schedule.n_steps")
    if steps is not None:
        apply_overrides(config, {"schedule": schedule_for(steps)})
    apply_flags(config, args)
    config.plugins = tuple(dict.fromkeys([*config.plugins, *args.plugin]))
    if not args.config and _preset_choice(args, "batch_B") is None:
        config.fit_batch_to_agents()  # after --env-kwargs, which may change the agents
    return config


def _preset_choice(args: argparse.Namespace, key: str) -> Any:
    """The algorithm or env the user chose, by its flag or by ``--set KEY=...`` (the last
    one given wins, as ``--set`` applies last): either way it picks the preset, so that
    ``--set algo=a2c`` (a sweep's grid) runs what ``--algo a2c`` runs."""
    value = given_value(args, key)
    for assignment in args.set:
        name, sep, setting = assignment.partition("=")
        if sep and name.strip() == key:
            value = setting.strip()
    return value


def given_flags(args: argparse.Namespace) -> list[tuple[str, str, Any]]:
    """``(flag as typed, config key, value)`` of every flag the user set (except --algo,
    --env and --steps: the preset's, applied first), in the order they apply, ``--set``
    last; a field of whichever algorithm runs is keyed ``ALGO_FIELD + field``."""
    given = [g for g in config_given_flags(args) if g[1] not in PRESET_KEYS]
    for assignment in args.set:
        key, value = _assignment(assignment)
        given.append((f"--set {assignment}", key, value))
    return given


# The flags that pick the preset (and the run's length and cadence): applied before the rest.
PRESET_KEYS = ("algo", "env", "schedule.n_steps")


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
    env = args.env if args.command == "check-env" else given_value(args, "env")
    own_env = env_module(env) if env else None
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

    algo = given_value(args, "algo") or RunConfig.algo
    env = given_value(args, "env") or RunConfig.env
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
    steps = given_value(args, "schedule.n_steps")
    if steps is not None:  # extend (or shorten) the run; cadence stays as saved
        set_field(config, "schedule.n_steps", steps)
    max_restarts = given_value(args, "schedule.max_restarts")
    if max_restarts is not None:
        set_field(config, "schedule.max_restarts", max_restarts)
    asked = copy.deepcopy(config)
    asked.algo = given_value(args, "algo") or asked.algo
    asked.env = given_value(args, "env") or asked.env
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


def _checked_config(data: dict[str, Any], named: Sequence[str], source: str) -> RunConfig:
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
    log_dir: str | None = args.log_dir
    if restarted and log_dir and list_checkpoints(log_dir):
        return log_dir
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
        onnx=args.onnx,
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

    import_plugins(args.plugin)
    if args.seconds <= 0:
        raise ValueError(f"--seconds must be > 0, got {args.seconds}")
    if given_value(args, "n_workers") == "auto":
        raise ValueError("--n-workers auto tunes a training run; bench-sampler measures one count")
    # the sizes train would use for this env, then the flags given, as train applies them
    config = RunConfig.for_env(given_value(args, "env") or RunConfig.env, RunConfig.algo)
    args.set = []
    apply_flags(config, args)
    config.plugins = tuple(args.plugin)
    config.validate()
    env_factory = config.env_factory()
    agent = RandomAgent(EnvSpaces.of(env_factory).action)
    sampler = build_sampler(config, env_factory)
    workers = getattr(sampler, "n_workers", None) or config.n_workers or "default"
    shape = (
        f"{config.batch_B} envs, {workers} workers"
        if SAMPLERS.get(config.sampler).has_workers
        else f"{config.batch_B} envs in this process"
    )
    rate = measure_steps_per_second(sampler, agent, args.seconds)
    print(
        f"{config.sampler} sampler on {config.env}: {rate:,.0f} env steps/s ({shape}, "
        f"T={config.batch_T})"
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
        if args.command == "tune":
            return cmd_tune(args)
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
