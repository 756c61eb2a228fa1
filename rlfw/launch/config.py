"""One typed config for a whole run, per-family presets, and assembly of the run from it."""
from __future__ import annotations

import dataclasses
import json
import os
import typing
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from rlfw.agents import ActorCriticAgent
from rlfw.agents.dqn_agent import DqnAgent
from rlfw.algos import A2C, ALGOS, DQN, PPO, A2CConfig, DQNConfig, PPOConfig
from rlfw.envs import AtariOptions, EnvFactory, EnvSpaces, is_atari
from rlfw.runners import AsyncRunner, ConcurrentRunner, RunSchedule, SyncRunner
from rlfw.launch.affinity import AffinityPlan, apply_affinity, plan_affinity
from rlfw.launch.presets import env_family, preset, schedule_for
from rlfw.distributed import RankGroup, rank_device
from rlfw.samplers import (AlternatingSampler, NativeAtariSampler, ParallelCpuSampler,
                           ParallelGpuSampler, QueueSampler, SerialSampler)
from rlfw.checks import check_positive
from rlfw.samplers.workers import default_workers
from rlfw.seeding import seed_everything

__all__ = ["RUNNERS", "SAMPLERS", "RunConfig", "affinity_plan", "apply_overrides",
           "available_devices", "build_agent", "build_algo", "build_runner", "build_sampler",
           "check_device", "config_keys", "env_family", "preset", "schedule_for", "set_field",
           "tune_workers"]

SAMPLERS = ("serial", "cpu", "gpu", "alternating", "native", "queue")
RUNNERS = ("sync", "concurrent", "async")

# Saved config keys that were renamed: old key -> (new key, value), or (None, _) to drop.
LEGACY_KEYS = {
    "n_envs": lambda v: ("batch_B", v),
    # evaluate=False is now eval_every=None (saved after eval_every, so it wins)
    "schedule.evaluate": lambda v: (None, v) if v else ("schedule.eval_every", None),
}


@dataclass
class RunConfig:
    """Everything that defines a run; saved as ``config.json`` and rebuilt from it on resume."""

    algo: str = "ppo"
    env: str = "CartPole-v1"
    sampler: str = "serial"
    runner: str = "sync"             # 'sync', 'concurrent' (HTS-RL, ppo/a2c) or 'async'
    batch_B: int = 8                 # envs stepped per batch (the B of [T, B])
    batch_T: int = 32                # steps per env per batch
    seed: int = 0
    model: str = "auto"              # 'mlp', 'cnn' or 'auto' (CNN for uint8 images)
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"         # of MLP hidden layers: 'tanh' or 'relu'
    log_std_init: float = 0.0        # Gaussian policies' initial log-std
    device: str = "cpu"
    normalize_obs: bool = False      # ppo/a2c: running mean/std of observations in the model
    obs_clip: float = 10.0           # of normalized observations
    n_eval_envs: int = 4
    n_eval_workers: int | None = None  # eval env processes; None: usable cores on Atari, else 0
    n_workers: int | None = None     # parallel samplers; None: number of usable cores
    tune_workers: bool = False       # pick n_workers by measured steps/s first (GA3C)
    tune_seconds: float = 2.0        # measuring time per tried worker count
    pin_cpus: bool = False           # pin learner and workers as the affinity plan says
    start_method: str = "spawn"      # worker processes: 'spawn', 'forkserver' or 'fork'
    world_size: int = 1              # learner ranks (set by torchrun; recorded, not chosen)
    schedule: RunSchedule = field(default_factory=lambda: RunSchedule(n_steps=120_000))
    atari: AtariOptions = field(default_factory=AtariOptions)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    a2c: A2CConfig = field(default_factory=A2CConfig)
    dqn: DQNConfig = field(default_factory=DQNConfig)

    def validate(self) -> None:
        """Every check that can fail before work starts, each naming the bad value."""
        if self.algo not in ALGOS:
            raise ValueError(f"algorithm {self.algo!r} unknown; choose from {ALGOS}")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler {self.sampler!r} unknown; choose from {SAMPLERS}")
        if self.runner not in RUNNERS:
            raise ValueError(f"runner {self.runner!r} unknown; choose from {RUNNERS}")
        if self.runner == "concurrent" and self.algo == "dqn":
            raise ValueError("runner 'concurrent' with algo 'dqn' cannot work: the concurrent "
                             "runner keeps the policy lag at one on-policy batch; for dqn use "
                             "runner 'sync' or 'async' (shared replay)")
        if self.tune_workers and self.sampler == "serial":
            raise ValueError("n_workers 'auto' with sampler 'serial' cannot work: it has no "
                             "workers; use sampler cpu, gpu, alternating, queue or native")
        if self.tune_workers and self.world_size > 1:
            raise ValueError("n_workers 'auto' in a multi-rank run is not supported: ranks "
                             "would tune apart; tune with one rank, then pass --n-workers N")
        if self.tune_workers and not self.tune_seconds > 0:
            raise ValueError(f"tune_seconds must be > 0, got {self.tune_seconds!r}")
        if self.runner == "async" and self.algo == "dqn" and self.dqn.prioritized:
            raise ValueError("runner 'async' with dqn.prioritized=true is not supported; use "
                             "uniform replay with runner 'async', or runner 'sync'")
        check_positive(batch_B=self.batch_B, batch_T=self.batch_T, n_eval_envs=self.n_eval_envs,
                       world_size=self.world_size)
        if self.normalize_obs and self.algo == "dqn":
            raise ValueError("normalize_obs is for ppo and a2c (continuous control); dqn "
                             "learns from raw observations: set normalize_obs=false")
        if not self.obs_clip > 0:
            raise ValueError(f"obs_clip must be > 0, got {self.obs_clip!r}")
        if self.n_workers is not None:
            check_positive(n_workers=self.n_workers)
        self.schedule.validate()
        self.algo_config().validate()
        self.env_factory().validate()
        if self.sampler == "native" and not is_atari(self.env):
            raise ValueError(f"sampler 'native' runs ALE games only ('ALE/<Game>-v5'), got env "
                             f"{self.env!r}; use serial, cpu, gpu or alternating")
        check_device(self.device)

    def algo_config(self) -> PPOConfig | A2CConfig | DQNConfig:
        return getattr(self, self.algo)

    def env_factory(self) -> EnvFactory:
        return EnvFactory(self.env, atari=self.atari)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunConfig":
        """Rebuild from ``to_dict`` output (a saved ``config.json``); every value is checked
        against its field's type, unknown keys are errors."""
        config = cls()
        for key, value in _flatten(data):
            if key in LEGACY_KEYS:  # run folders written before a rename
                key, value = LEGACY_KEYS[key](value)
                if key is None:
                    continue
            set_field(config, key, value)
        return config

    @classmethod
    def load(cls, run_dir: str) -> "RunConfig":
        path = os.path.join(run_dir, "config.json")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{run_dir!r} is not a run folder: no config.json in it")
        with open(path) as f:
            return cls.from_dict(json.load(f))


def apply_overrides(config: RunConfig, overrides: dict[str, Any]) -> RunConfig:
    """Set top-level fields and nested ones (``{'ppo': {...}}``) from a plain dict, each
    value checked against its field's type."""
    for key, value in _flatten(overrides):
        set_field(config, key, value)
    return config


def _flatten(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``{'ppo': {'epochs': 4}}`` -> ``[('ppo.epochs', 4)]``."""
    out = []
    for key, value in data.items():
        if isinstance(value, dict):
            out += _flatten(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def config_keys(obj: Any = None, prefix: str = "") -> list[str]:
    """Every settable dotted key of a run config, e.g. ``ppo.epochs``."""
    obj = RunConfig() if obj is None else obj
    keys = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            keys += config_keys(value, f"{prefix}{f.name}.")
        else:
            keys.append(f"{prefix}{f.name}")
    return keys


def set_field(config: RunConfig, key: str, value: Any) -> None:
    """Set dotted ``key`` (``seed``, ``ppo.epochs``) to ``value`` (a Python value, or text
    as given to ``--set``), converted to the field's declared type; ``ValueError`` naming
    the key and what is allowed otherwise."""
    parts = key.split(".")
    group = parts[0] if len(parts) == 2 else None
    owner = getattr(config, group, None) if group else config
    name = parts[-1]
    if len(parts) > 2 or not dataclasses.is_dataclass(owner) or name not in _field_names(owner):
        raise ValueError(_unknown_key(key))
    if dataclasses.is_dataclass(getattr(owner, name)):
        raise ValueError(f"config key {key!r} is a group; set one of its fields: "
                         + ", ".join(k for k in config_keys() if k.startswith(key + ".")))
    converted = _convert(key, value, typing.get_type_hints(type(owner))[name])
    if group is None:
        setattr(config, name, converted)
    else:  # replaced, not mutated: some groups (atari) are frozen
        setattr(config, group, dataclasses.replace(owner, **{name: converted}))


def _field_names(obj: Any) -> set[str]:
    return {f.name for f in dataclasses.fields(obj)}


def _unknown_key(key: str) -> str:
    return f"unknown config key {key!r}; valid keys: {', '.join(config_keys())}"


_TRUE, _FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


def _convert(key: str, value: Any, hint: Any) -> Any:
    """``value`` as type ``hint`` (int, float, bool, str, X | None, tuple[int, ...])."""
    args = typing.get_args(hint)
    if type(None) in args:  # Optional[X]
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            return None
        (hint,) = [a for a in args if a is not type(None)]
        args = typing.get_args(hint)
    wrong = ValueError(f"config key {key!r} takes {_type_name(hint)}, got {value!r}")
    if typing.get_origin(hint) is tuple:
        if isinstance(value, str):
            value = [v for v in value.strip("()[] ").split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise wrong
        return tuple(_convert(key, v, args[0]) for v in value)
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
            return value.lower() in _TRUE
        raise wrong
    if hint is int:
        if isinstance(value, bool):
            raise wrong
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value.replace("_", ""))
            except ValueError:
                raise wrong from None
        raise wrong
    if hint is float:
        if isinstance(value, bool):
            raise wrong
        try:
            return float(value)
        except (TypeError, ValueError):
            raise wrong from None
    if hint is str:
        if not isinstance(value, str):
            raise wrong
        return value
    raise wrong


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is tuple:
        return f"a comma-separated list of {_type_name(typing.get_args(hint)[0])}"
    return {bool: "true or false", int: "an integer", float: "a number",
            str: "text"}.get(hint, str(hint))


def check_device(device: str) -> None:
    """``ValueError`` naming ``device`` and what is available, before any work starts."""
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ValueError(f"device {device!r} is not a torch device; available: "
                         f"{', '.join(available_devices())}") from None
    if dev.type == "cpu":
        return
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if dev.index is None and count or (dev.index is not None and dev.index < count):
            return
        why = ("this torch build has no CUDA" if torch.version.cuda is None else
               f"{count} CUDA device(s) visible")
        raise ValueError(f"device {device!r} is not available ({why}); available: "
                         f"{', '.join(available_devices())}")
    raise ValueError(f"device {device!r} is not supported; available: "
                     f"{', '.join(available_devices())}")


def available_devices() -> list[str]:
    out = ["cpu"]
    if torch.cuda.is_available():
        out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return out


def build_agent(config: RunConfig, spaces: EnvSpaces) -> ActorCriticAgent | DqnAgent:
    if config.algo == "dqn":
        return DqnAgent.build(spaces, config.batch_B, config.model, config.hidden,
                              config.dqn.dueling, device=config.device,
                              eval_epsilon=config.dqn.eval_epsilon)
    return ActorCriticAgent.build(spaces, config.model, config.hidden, device=config.device,
                                  algo=config.algo, normalize_obs=config.normalize_obs,
                                  obs_clip=config.obs_clip, activation=config.activation,
                                  log_std_init=config.log_std_init)


def build_algo(config: RunConfig) -> PPO | A2C | DQN:
    kinds = {"ppo": PPO, "a2c": A2C, "dqn": DQN}
    return kinds[config.algo](config.algo_config())


def build_sampler(config: RunConfig, env_factory: EnvFactory,
                  worker_cores: list[int] | None = None):
    """The sampler named by ``config.sampler``; every kind fills the same ``Samples``.
    ``worker_cores`` (an affinity plan's) are where ``pin_cpus`` puts the workers."""
    eval_workers = config.n_eval_workers
    if eval_workers is None:  # Atari envs cost more than a pipe round trip; CartPole does not
        eval_workers = default_workers(config.n_eval_envs) if is_atari(config.env) \
            else 0
    common = dict(batch_T=config.batch_T, batch_B=config.batch_B, seed=config.seed,
                  n_eval_envs=config.n_eval_envs, n_eval_workers=eval_workers)
    if config.sampler == "serial":
        return SerialSampler(env_factory, **common)
    if config.sampler == "native":
        return NativeAtariSampler(env_factory, n_threads=config.n_workers, **common)
    pin = (worker_cores or True) if config.pin_cpus else False
    parallel = dict(n_workers=config.n_workers, pin_cpus=pin, start_method=config.start_method)
    kinds = {"cpu": ParallelCpuSampler, "gpu": ParallelGpuSampler,
             "alternating": AlternatingSampler, "queue": QueueSampler}
    return kinds[config.sampler](env_factory, **common, **parallel)


def tune_workers(config: RunConfig, env_factory: EnvFactory, agent, log_dir: str | None,
                 say=print) -> None:
    """``--n-workers auto``: hill-climb the sampler's worker count on measured env steps/s
    (throw-away samplers, before training), then fix ``config.n_workers`` to the best so
    that ``config.json`` records it and a resumed or repeated run uses it."""
    from rlfw.samplers.scheduling import tune_n_workers, worker_candidates

    candidates = worker_candidates(config.batch_B, even_only=config.sampler == "alternating")

    def make_sampler(n: int):
        return build_sampler(dataclasses.replace(config, n_workers=n, tune_workers=False),
                             env_factory)

    def report(trial) -> None:
        say(f"rlfw: tuning n_workers: {trial.n_workers} -> "
            f"{trial.steps_per_second:,.0f} env steps/s")

    best, trials = tune_n_workers(make_sampler, agent, candidates, config.tune_seconds, report)
    say(f"rlfw: tuning n_workers: chose {best} (of {[t.n_workers for t in trials]} tried)")
    config.n_workers, config.tune_workers = best, False
    if log_dir is not None:
        os.makedirs(log_dir, exist_ok=True)
        with open(os.path.join(log_dir, "tuning.json"), "w") as f:
            json.dump({"chosen": {"n_workers": best},
                       "trials": [dataclasses.asdict(t) for t in trials]}, f, indent=2)


def affinity_plan(config: RunConfig, ranks: RankGroup | None) -> AffinityPlan:
    """The affinity plan of this machine's ranks for ``config``: its sampler's workers
    (native: ALE threads), by default one per core of a rank's share."""
    n_workers = 0 if config.sampler == "serial" else config.n_workers
    return plan_affinity(n_workers, 1 if ranks is None else ranks.local_world_size,
                         torch.device(config.device).type == "cuda",
                         max_workers=config.batch_B)


def build_runner(config: RunConfig, log_dir: str | None, resume: bool = False,
                 progress: bool = True, stdout: bool = True,
                 ranks: RankGroup | None = None) -> SyncRunner:
    """Validate, seed, and compose agent + sampler + algorithm into a runner (``with
    runner:`` closes its sampler); tunes ``n_workers`` first if ``config.tune_workers``.

    With ``ranks`` (a torchrun launch) this builds one rank's replica: the same initial
    weights everywhere, the rank's own env seeds and noise streams, its model on
    ``cuda:LOCAL_RANK`` when ``device`` is a GPU; ``config.world_size`` records the rank
    count, and resuming with a different one is refused."""
    world = 1 if ranks is None else ranks.world_size
    if resume and config.world_size != world:
        raise ValueError(f"run {log_dir!r} was trained with world_size {config.world_size} and "
                         f"this launch has {world} rank(s); resume it with the same number of "
                         f"ranks (torchrun --nproc-per-node ... with {config.world_size} in all)")
    config.world_size = world
    config.validate()
    seed = config.seed if ranks is None else ranks.seed(config.seed)
    local = dataclasses.replace(config, seed=seed, device=rank_device(config.device, ranks))
    plan = affinity_plan(local, ranks)
    share = plan.for_rank(0 if ranks is None else ranks.local_rank)
    if ranks is not None and local.n_workers is None and local.sampler != "serial":
        local.n_workers = len(share.worker_cores)  # this rank's cores only
    # One process alone keeps the torch threads its caller chose; ranks and pinned runs
    # take the plan's (torchrun's default of one thread per rank starves the learner).
    apply_affinity(share, local.pin_cpus, set_threads=ranks is not None or local.pin_cpus)
    seed_everything(config.seed)  # model init depends on it: the same on every rank
    env_factory = config.env_factory()
    spaces = EnvSpaces.of(env_factory)
    agent = build_agent(local, spaces)
    if ranks is not None:
        seed_everything(seed)  # then each rank's global streams are its own
    if config.tune_workers:
        tune_workers(config, env_factory, agent, log_dir, say=print if stdout else
                     (lambda line: None))
        local.n_workers = config.n_workers
    algo = build_algo(config)
    sampler = build_sampler(local, env_factory, share.worker_cores)
    kind = {"sync": SyncRunner, "concurrent": ConcurrentRunner,
            "async": AsyncRunner}[config.runner]
    runner = kind(algo, agent, sampler, config.schedule, log_dir=log_dir, seed=seed,
                  config=config.to_dict(), resume=resume, progress=progress, stdout=stdout,
                  ranks=ranks)
    if ranks is None or ranks.is_chief:  # once everything was accepted
        if stdout:
            print(f"rlfw: {plan.describe()}")
        if log_dir is not None:
            plan.save(log_dir)
    return runner
