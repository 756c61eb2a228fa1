"""``rlfw tune``: settings that learn an env, found by Optuna (as rl-baselines3-zoo's
``train.py --optimize``): TPE (10 random startup trials, multivariate), a median pruner on
each trial's evaluation curve, the last evaluation's mean return as the objective.

Every trial is an ordinary rlfw run in ``STUDY/trials/trial_NNNN`` (its config, seed and
checkpoints: resume, evaluate or export any of them). The study lives in an Optuna
database: SQLite in the study folder by default, or ``--storage URL`` for a database the
user runs, so workers on several machines share one study. A study killed and started
again with the same command continues: its interrupted trials are marked failed and
retried with the same settings, never counted; it ends with ``--trials`` trials complete
or pruned. At the end the folder holds README.md (the best trial as a ``rlfw train``
command line and a preset snippet, the top trials) and Optuna's plots."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from rlfw.algos.search_space import Param, merged
from rlfw.launch.config import RunConfig, flatten, set_field, train_command
from rlfw.registry import ALGOS

STUDY_NAME = "rlfw"
REPORT = "README.md"
DATABASE = "study.db"
# A worker that stops beating this long is taken for dead: its trial is failed and retried.
HEARTBEAT_S, GRACE_S = 5, 20


@dataclass(frozen=True)
class TuneSettings:
    """One study: ``trials`` runs of ``algo`` on ``env`` for ``steps`` env steps each,
    ``evaluations`` evaluations of ``eval_episodes`` episodes per run (the pruner's
    curve; the last one is the objective), over ``space`` (the algorithm's default search
    space with the user's overrides), ``jobs`` worker processes of one torch thread;
    ``fixed``: ``(key, value)`` settings of every trial (``--set``), applied on the preset
    before the drawn values."""

    algo: str
    env: str
    trials: int
    steps: int
    study_dir: str
    jobs: int = 1
    storage: str | None = None
    seed: int = 0
    evaluations: int = 5
    eval_episodes: int = 10
    startup_trials: int = 10
    space: tuple[Param, ...] = field(default_factory=tuple)
    fixed: tuple[tuple[str, str], ...] = ()

    @property
    def storage_url(self) -> str:
        return self.storage or f"sqlite:///{os.path.abspath(self.study_dir)}/{DATABASE}"


def optuna_module() -> Any:
    """``optuna``, or ``ValueError`` naming the extra to install."""
    try:
        import optuna
    except ImportError:
        raise ValueError(
            "rlfw tune needs optuna, which is not installed: pip install -e '.[tune]'"
        ) from None
    return optuna


def search_space(algo: str, overrides: list[Param]) -> tuple[Param, ...]:
    """``algo``'s declared space with ``overrides``; ``ValueError`` when it is empty."""
    space = merged(ALGOS.get(algo).search_space, overrides)
    if not space:
        raise ValueError(
            f"algorithm {algo!r} declares no search space; give one with --space "
            "KEY=LOW:HIGH[:log] or KEY=A,B (e.g. --space sac.learning_rate=1e-4:1e-3:log)"
        )
    return space


def trained_config(settings: TuneSettings, values: dict[str, Any], seed: int) -> RunConfig:
    """What one trial trains: the preset for (algo, env) at ``steps``, the ``--set``
    settings, then ``values``."""
    config = RunConfig.for_env(settings.env, settings.algo, steps=settings.steps, seed=seed)
    for key, text in settings.fixed:
        set_field(config, key, text)
    for key, value in values.items():
        set_field(config, key, value)
    return config


def trial_config(settings: TuneSettings, values: dict[str, Any], seed: int) -> RunConfig:
    """The run of one trial: ``trained_config`` with the study's evaluations (which never
    change what it learns) and a checkpoint at its end."""
    return with_study_schedule(settings, trained_config(settings, values, seed))


def with_study_schedule(settings: TuneSettings, config: RunConfig) -> RunConfig:
    """``config`` (changed in place) evaluated as the study's pruner reads it."""
    schedule = config.schedule
    schedule.eval_every = max(settings.steps // settings.evaluations, 1)
    schedule.eval_episodes = settings.eval_episodes
    schedule.checkpoint_every = settings.steps  # the end's checkpoint: resumable, exportable
    return config


def check_space(settings: TuneSettings) -> None:
    """``ValueError`` naming a key that does not exist, or a value at a range's end (or a
    choice) the run's checks refuse: a study never starts on a space it cannot run."""
    try:
        trial_config(settings, {}, settings.seed).validate()
    except ValueError as err:
        given = " ".join(f"--set {key}={text}" for key, text in settings.fixed)
        raise ValueError(f"{given or 'the preset'}: {err}") from None
    for param in settings.space:
        for value in param.extremes():
            try:
                trial_config(settings, {param.key: value}, settings.seed).validate()
            except ValueError as err:
                raise ValueError(f"--space {param.key}: the value {value!r} is refused: {err}")


class PruneOnEvaluation:
    """A run callback: each evaluation reported to the trial; when the pruner says so,
    the run stops cleanly at the next update (its checkpoint written) and the trial is
    pruned."""

    def __init__(self, trial: Any):
        self.trial = trial
        self.pruned = False

    def on_eval(self, metrics: dict[str, float]) -> None:
        self.trial.report(float(metrics["eval/return_mean"]), int(metrics["env_steps"]))
        self.pruned = self.pruned or bool(self.trial.should_prune())

    def on_iteration(self, metrics: dict[str, float]) -> bool | None:
        return False if self.pruned else None


class StudyFull(Exception):
    """A trial that would take the study past its count (another worker's trial already
    fills it): not run, marked failed, never counted."""


def _objective(settings: TuneSettings, trial: Any) -> float:
    from optuna.trial import TrialState

    from rlfw.launch.build import build_runner

    optuna = optuna_module()
    running = trial.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    if counted(trial.study) + sum(t.number != trial.number for t in running) >= settings.trials:
        trial.study.stop()  # workers that retry dead trials at once would overshoot
        raise StudyFull(f"the study holds {settings.trials} trials, counting those running")
    values = {param.key: param.suggest(trial) for param in settings.space}
    seed = settings.seed + trial.number
    config = trained_config(settings, values, seed)
    run_dir = os.path.join(settings.study_dir, "trials", f"trial_{trial.number:04d}")
    trial.set_user_attr("run_dir", os.path.abspath(run_dir))
    trial.set_user_attr("seed", seed)
    trial.set_user_attr("values", json.dumps(values))
    # the run a user would start: before the study's evaluation cadence is added
    trial.set_user_attr("command", train_command(config))
    with_study_schedule(settings, config)
    pruner = PruneOnEvaluation(trial)
    runner = build_runner(config, run_dir, progress=False, stdout=False, callbacks=[pruner])
    with runner:
        result = runner.train()
    if pruner.pruned:
        raise optuna.TrialPruned()
    return float(result.eval_history[-1][1])


def open_study(settings: TuneSettings, worker: int = 0) -> Any:
    """The study in its storage (made on first use), with the sampler, pruner and the
    heartbeat that retries a dead worker's trial. Each worker's sampler has its own seed
    (``seed + worker``): samplers seeded alike draw the same settings from the same
    study, so two workers would run every startup trial twice."""
    optuna = optuna_module()
    from optuna.storages import RDBStorage

    with warnings.catch_warnings():  # the heartbeat is marked experimental since 2.8
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        storage = RDBStorage(
            settings.storage_url,
            heartbeat_interval=HEARTBEAT_S,
            grace_period=GRACE_S,
            **_retry_stale_trials(optuna),
        )
    return optuna.create_study(
        study_name=STUDY_NAME,
        storage=storage,
        sampler=optuna.samplers.TPESampler(
            n_startup_trials=settings.startup_trials,
            multivariate=True,
            seed=settings.seed + worker,
        ),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=5),
        direction="maximize",
        load_if_exists=True,
    )


def _retry_stale_trials(optuna: Any) -> dict[str, Any]:
    """The storage argument that re-runs a dead worker's trial with its settings (Optuna
    4.9 renamed it)."""
    storages = optuna.storages
    if hasattr(storages, "RetryHeartbeatStaleTrialCallback"):
        return {"heartbeat_stale_trial_callback": storages.RetryHeartbeatStaleTrialCallback(2)}
    return {"failed_trial_callback": storages.RetryFailedTrialCallback(max_retry=2)}


def counted(study: Any) -> int:
    """Trials that count towards ``--trials``: complete or pruned."""
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def _work(settings: TuneSettings, worker: int = 0) -> None:
    """One worker: trials until the study holds ``settings.trials`` counted ones."""
    torch.set_num_threads(1)
    optuna = optuna_module()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = open_study(settings, worker)
    from optuna.study import MaxTrialsCallback
    from optuna.trial import TrialState

    if counted(study) >= settings.trials:
        return
    study.optimize(
        lambda trial: _objective(settings, trial),
        callbacks=[
            MaxTrialsCallback(settings.trials, states=(TrialState.COMPLETE, TrialState.PRUNED))
        ],
        catch=(StudyFull,),
        gc_after_trial=True,
    )


def run_study(settings: TuneSettings, progress: bool = True) -> Any:
    """Run (or continue) the study to ``trials`` counted trials, then write its report."""
    optuna = optuna_module()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    check_space(settings)
    os.makedirs(settings.study_dir, exist_ok=True)
    study = open_study(settings)  # made here once, before workers race to make it
    _same_fixed_settings(study, settings)
    if settings.jobs == 1 and not progress:
        _work(settings)
    else:
        _run_workers(settings, study, progress)
    write_report(open_study(settings), settings)
    return study


def _same_fixed_settings(study: Any, settings: TuneSettings) -> None:
    """Record the study's ``--set`` settings on first use; ``ValueError`` when a restart
    gives others (its trials would not be comparable)."""
    given = [f"{key}={text}" for key, text in settings.fixed]
    recorded = study.user_attrs.get("fixed")
    if recorded is None:
        study.set_user_attr("fixed", given)
    elif recorded != given:
        raise ValueError(
            f"the study in {settings.study_dir} ran every trial with --set {recorded}, "
            f"this command gives {given}: give the same, or another --study"
        )


def _run_workers(settings: TuneSettings, study: Any, progress: bool) -> None:
    from tqdm import tqdm

    context = mp.get_context("spawn")
    workers = [context.Process(target=_work, args=(settings, k)) for k in range(settings.jobs)]
    for process in workers:
        process.start()
    bar = tqdm(total=settings.trials, desc="trials", disable=not progress)
    try:
        while any(p.is_alive() for p in workers):
            bar.n = min(counted(study), settings.trials)
            bar.refresh()
            time.sleep(1.0)
    except KeyboardInterrupt:
        for process in workers:
            process.terminate()
        raise
    finally:
        for process in workers:
            process.join()
        bar.n = min(counted(study), settings.trials)
        bar.close()
    failed = [p.exitcode for p in workers if p.exitcode]
    if failed:
        raise RuntimeError(f"{len(failed)} tune worker(s) failed (exit codes {failed})")


def write_report(study: Any, settings: TuneSettings) -> str:
    """README.md in the study folder: the best trial as a command and a preset snippet,
    the top trials, and Optuna's plots (PNG) where matplotlib is installed."""
    finished = [t for t in study.trials if t.state.name in ("COMPLETE", "PRUNED")]
    complete = sorted(
        (t for t in finished if t.state.name == "COMPLETE"), key=lambda t: -float(t.value)
    )
    lines = [
        f"# rlfw tune: {settings.algo} on {settings.env}",
        "",
        f"{len(finished)} trials ({len(complete)} complete, {len(finished) - len(complete)} "
        f"pruned) of {settings.steps:,} env steps each; objective: the last evaluation's mean "
        f"return ({settings.eval_episodes} episodes); TPE seeded {settings.seed}; storage "
        f"`{settings.storage_url}`."
        + "".join(f" Every trial with `{key}={text}`." for key, text in settings.fixed),
        "",
    ]
    if complete:
        best = complete[0]
        typed = dict(flatten(trained_config(settings, {}, settings.seed).to_dict()))
        fixed = {key: typed[key] for key, _ in settings.fixed}
        values = {**fixed, **json.loads(best.user_attrs["values"])}
        lines += [
            f"## Best: trial {best.number}, return {best.value:.2f}",
            "",
            "```bash",
            best.user_attrs["command"],
            "```",
            "",
            "As a preset entry's settings:",
            "",
            "```json",
            json.dumps(values, indent=4),
            "```",
            "",
        ]
    lines += ["## Top trials", "", "| trial | return | seed | settings |", "|---|---|---|---|"]
    for trial in complete[:10]:
        shown = ", ".join(f"{k}={v!r}" for k, v in json.loads(trial.user_attrs["values"]).items())
        lines.append(
            f"| {trial.number} | {trial.value:.2f} | {trial.user_attrs['seed']} | {shown} |"
        )
    lines += ["", *_plots(study, settings.study_dir)]
    path = os.path.join(settings.study_dir, REPORT)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


def _plots(study: Any, folder: str) -> list[str]:
    """Optuna's plots as PNGs (optimization history, parameter importances, parallel
    coordinates); the lines that show them, or why there are none."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from optuna.visualization import matplotlib as plots
    except ImportError:
        return ["(No plots: matplotlib is not installed, extra [plot].)"]
    out = ["## Plots", ""]
    for name, draw in (
        ("history", plots.plot_optimization_history),
        ("importances", plots.plot_param_importances),
        ("parallel", plots.plot_parallel_coordinate),
    ):
        try:
            with warnings.catch_warnings():  # optuna marks its matplotlib plots experimental
                warnings.simplefilter("ignore")
                draw(study)
            figure: Any = plt.gcf()  # each plot draws on a new current figure
            figure.savefig(os.path.join(folder, f"{name}.png"), dpi=90, bbox_inches="tight")
            plt.close(figure)
            out.append(f"![{name}]({name}.png)")
        except (ValueError, RuntimeError) as err:  # too few trials for this plot
            out.append(f"({name}: {err})")
    return out
