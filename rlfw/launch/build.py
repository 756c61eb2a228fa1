"""Assembly of a run from its ``RunConfig``: agent, algorithm, sampler and runner as the
registries declare them, seeded, placed on cores (affinity) and, for torchrun, per rank.
Scripts and the CLI both build runs here."""

from __future__ import annotations

import dataclasses  # asdict of tuning trials
import os
import re
import time
from typing import Any, Callable, Sequence, cast

import torch

from rlfw.agents.base import Agent
from rlfw.algos.base import Algorithm
from rlfw.algos.spec import AlgoConstructor
from rlfw.envs import EnvFactory, EnvSpaces
from rlfw.launch.affinity import (
    AffinityPlan,
    apply_affinity,
    busy_machine_warning,
    learner_threads,
    plan_affinity,
)
from rlfw.launch.config import RunConfig
from rlfw.registry import ALGOS, RUNNERS, SAMPLERS
from rlfw.runfolder.claim import claim_run_folder
from rlfw.runfolder.files import write_json
from rlfw.runfolder.folder_lock import FolderLock
from rlfw.runners import Runner
from rlfw.samplers.base import Sampler
from rlfw.samplers.spec import SamplerConstructor
from rlfw.utils.distributed import RankGroup, rank_device
from rlfw.utils.seeding import seed_everything

__all__ = [
    "affinity_plan",
    "build_agent",
    "build_algo",
    "build_runner",
    "build_sampler",
    "default_log_dir",
    "tune_workers",
]


def default_log_dir(config: RunConfig) -> str:
    """``runs/<algo>-<env>-s<seed>-<date-time>``: a fresh run folder for each run."""
    env = re.sub(r"[^A-Za-z0-9_.-]+", "_", config.env)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{config.algo}-{env}-s{config.seed}-{stamp}")


def build_agent(config: RunConfig, spaces: EnvSpaces) -> Agent:
    """The agent the configured algorithm trains (its registered builder)."""
    return ALGOS.get(config.algo).build_agent(config, spaces)


def build_algo(
    config: RunConfig, spaces: EnvSpaces, env_factory: EnvFactory | None = None
) -> Algorithm:
    """The configured algorithm, its env-dependent choices (a config's ``for_env``) made
    for ``spaces``' env; an algorithm that needs the env itself (HER's ``compute_reward``)
    is given ``env_factory`` through its ``bind_env``."""
    own = config.algo_config()
    for_env = getattr(own, "for_env", None)
    make = cast(AlgoConstructor, ALGOS.get(config.algo).algo_cls)
    algo = make(own if for_env is None else for_env(spaces))
    bind_env = getattr(algo, "bind_env", None)
    if env_factory is not None and bind_env is not None:
        bind_env(env_factory)
    return algo


def build_sampler(
    config: RunConfig, env_factory: EnvFactory, worker_cores: list[int] | None = None
) -> Sampler:
    """The sampler named by ``config.sampler``; every kind fills the same ``Samples``.
    ``worker_cores`` (an affinity plan's) are where ``pin_cpus`` puts the workers."""
    spec = SAMPLERS.get(config.sampler)
    eval_workers = config.eval_worker_count()
    options = spec.options(config, worker_cores)
    if eval_workers:  # their processes start as the run says, whatever the sampler kind
        options.setdefault("start_method", config.start_method)
    make = cast(SamplerConstructor, spec.cls)
    return make(
        env_factory,
        batch_T=config.batch_T,
        batch_B=config.batch_B,
        seed=config.seed,
        n_eval_envs=config.n_eval_envs,
        n_eval_workers=eval_workers,
        **options,
    )


def tune_workers(
    config: RunConfig,
    env_factory: EnvFactory,
    agent: Agent,
    log_dir: str | None,
    say: Callable[[str], object] = print,
) -> None:
    """``--n-workers auto``: hill-climb the sampler's worker count on measured env steps/s
    (throw-away samplers, before training), then fix ``config.n_workers`` to the best so
    that ``config.json`` records it and a resumed or repeated run uses it."""
    from rlfw.samplers.machinery.scheduling import Trial, tune_n_workers, worker_candidates

    candidates = worker_candidates(
        config.batch_B, groups=SAMPLERS.get(config.sampler).worker_groups
    )

    def make_sampler(n: int) -> Sampler:
        return build_sampler(config.replaced(n_workers=n, tune_workers=False), env_factory)

    def report(trial: Trial) -> None:
        say(
            f"rlfw: tuning n_workers: {trial.n_workers} -> "
            f"{trial.steps_per_second:,.0f} env steps/s"
        )

    best, trials = tune_n_workers(make_sampler, agent, candidates, config.tune_seconds, report)
    say(f"rlfw: tuning n_workers: chose {best} (of {[t.n_workers for t in trials]} tried)")
    config.n_workers, config.tune_workers = best, False
    if log_dir is not None:
        os.makedirs(log_dir, exist_ok=True)
        write_json(
            os.path.join(log_dir, "tuning.json"),
            {"chosen": {"n_workers": best}, "trials": [dataclasses.asdict(t) for t in trials]},
        )


def affinity_plan(config: RunConfig, ranks: RankGroup | None) -> AffinityPlan:
    """The affinity plan of this machine's ranks for ``config``: its sampler's workers
    (native: ALE threads), by default one per core of a rank's share."""
    n_workers = config.n_workers if SAMPLERS.get(config.sampler).has_workers else 0
    return plan_affinity(
        n_workers,
        1 if ranks is None else ranks.local_world_size,
        torch.device(config.device).type == "cuda",
        max_workers=config.batch_B,
    )


def build_runner(
    config: RunConfig,
    log_dir: str | None,
    resume: bool = False,
    progress: bool = True,
    stdout: bool = True,
    ranks: RankGroup | None = None,
    trust_checkpoint: bool = False,
    callbacks: Sequence[Any] = (),
) -> Runner:
    """Validate, seed, and compose agent + sampler + algorithm into a runner (``with
    runner:`` closes its sampler); tunes ``n_workers`` first if ``config.tune_workers``.

    ``log_dir`` is locked for this run before anything is written there (another run in it
    is refused) and must not hold another run's files unless ``resume``.
    ``trust_checkpoint``: resume from checkpoints holding pickles (see ``Runner``).
    ``callbacks``: the run's observers (``rlfw.runners.callbacks``).

    With ``ranks`` (a torchrun launch) this builds one rank's replica: the same initial
    weights everywhere, the rank's own env seeds and noise streams, its model on
    ``cuda:LOCAL_RANK`` when ``device`` is a GPU; ``config.world_size`` records the rank
    count, and resuming with a different one is refused."""
    world = 1 if ranks is None else ranks.world_size
    if resume and config.world_size != world:
        raise ValueError(
            f"run {log_dir!r} was trained with world_size {config.world_size} and "
            f"this launch has {world} rank(s); resume it with the same number of "
            f"ranks (torchrun --nproc-per-node ... with {config.world_size} in all)"
        )
    config.world_size = world
    config.validate()
    chief = ranks is None or ranks.is_chief
    lock = claim_run_folder(log_dir, resume) if log_dir is not None and chief else None
    try:
        return _build_runner(
            config, log_dir, resume, progress, stdout, ranks, trust_checkpoint, lock, callbacks
        )
    except BaseException:
        if lock is not None:
            lock.release(discard=True)  # nothing started: leave no folder behind
        raise


def _build_runner(
    config: RunConfig,
    log_dir: str | None,
    resume: bool,
    progress: bool,
    stdout: bool,
    ranks: RankGroup | None,
    trust_checkpoint: bool,
    lock: FolderLock | None,
    callbacks: Sequence[Any],
) -> Runner:
    seed = config.seed if ranks is None else ranks.seed(config.seed)
    local = config.replaced(seed=seed, device=rank_device(config.device, ranks))
    plan = affinity_plan(local, ranks)
    share = plan.for_rank(0 if ranks is None else ranks.local_rank)
    if ranks is not None and local.n_workers is None and SAMPLERS.get(local.sampler).has_workers:
        local.n_workers = len(share.worker_cores)  # this rank's cores only
    # One process alone keeps the torch threads its caller chose; ranks and pinned runs
    # take the plan's (torchrun's default of one thread per rank starves the learner).
    apply_affinity(share, local.pin_cpus, set_threads=ranks is not None or local.pin_cpus)
    seed_everything(config.seed)  # model init depends on it: the same on every rank
    env_factory = config.env_factory().resolved()
    spaces = EnvSpaces.of(env_factory)
    agent = build_agent(local, spaces)
    model = getattr(agent, "model", None)
    threads = learner_threads(model, torch.get_num_threads(), config.torch_threads)
    if threads != torch.get_num_threads():  # built again under the run's own thread count
        torch.set_num_threads(threads)
        seed_everything(config.seed)
        agent = build_agent(local, spaces)
    contention = busy_machine_warning(plan.machine, threads)
    if contention is not None:
        plan.warnings.append(contention)
    if ranks is not None:
        seed_everything(seed)  # then each rank's global streams are its own
    if config.tune_workers:
        tune_workers(
            config, env_factory, agent, log_dir, say=print if stdout else (lambda line: None)
        )
        local.n_workers = config.n_workers
    # a replay keeps one frame per row only of stacks it can rebuild (the sampler's kind)
    rebuildable = SAMPLERS.get(config.sampler).rebuildable_frames
    algo_spaces = spaces if rebuildable else dataclasses.replace(spaces, frame_stack=1)
    algo = build_algo(config, algo_spaces, env_factory)
    sampler = build_sampler(local, env_factory, share.worker_cores)
    kind = RUNNERS.get(config.runner).cls
    own = {arg: getattr(config, name) for arg, name in kind.config_fields.items()}
    runner = kind(
        algo,
        agent,
        sampler,
        config.schedule,
        log_dir=log_dir,
        seed=seed,
        config=config.to_dict(),
        resume=resume,
        progress=progress,
        stdout=stdout,
        ranks=ranks,
        trust_checkpoint=trust_checkpoint,
        lock=lock,
        callbacks=callbacks,
        **own,
    )
    if ranks is None or ranks.is_chief:  # once everything was accepted
        if stdout:
            print(f"rlfw: {plan.describe()}")
        if log_dir is not None:
            plan.save(log_dir)
    return runner
