"""One typed config for a whole run, per-family presets, and assembly of the run from it."""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from rlfw.agents import ActorCriticAgent
from rlfw.agents.dqn_agent import DqnAgent
from rlfw.algos import A2C, ALGOS, DQN, PPO, A2CConfig, DQNConfig, PPOConfig
from rlfw.envs import AtariOptions, EnvFactory, EnvSpaces, is_atari
from rlfw.runners import RunSchedule, SyncRunner
from rlfw.samplers import (AlternatingSampler, NativeAtariSampler, ParallelCpuSampler,
                           ParallelGpuSampler, SerialSampler)
from rlfw.samplers.base import check_positive

SAMPLERS = ("serial", "cpu", "gpu", "alternating", "native")


@dataclass
class RunConfig:
    """Everything that defines a run; saved as ``config.json`` and rebuilt from it on resume."""

    algo: str = "ppo"
    env: str = "CartPole-v1"
    sampler: str = "serial"
    n_envs: int = 8                  # batch_B
    batch_T: int = 32                # steps per env per batch
    seed: int = 0
    model: str = "auto"              # 'mlp', 'cnn' or 'auto' (CNN for uint8 images)
    hidden: tuple[int, ...] = (64, 64)
    device: str = "cpu"
    n_eval_envs: int = 4
    n_workers: int | None = None     # parallel samplers; None: number of usable cores
    pin_cpus: bool = False           # pin sampler worker i to usable core i (psutil)
    start_method: str = "spawn"      # worker processes: 'spawn', 'forkserver' or 'fork'
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
        check_positive(n_envs=self.n_envs, batch_T=self.batch_T, n_eval_envs=self.n_eval_envs)
        if self.n_workers is not None:
            check_positive(n_workers=self.n_workers)
        self.schedule.validate()
        self.algo_config().validate()
        self.env_factory().validate()
        if self.sampler == "native" and not is_atari(self.env):
            raise ValueError(f"sampler 'native' runs ALE games only ('ALE/<Game>-v5'), got env "
                             f"{self.env!r}; use serial, cpu, gpu or alternating")

    def algo_config(self) -> PPOConfig | A2CConfig | DQNConfig:
        return getattr(self, self.algo)

    def env_factory(self) -> EnvFactory:
        return EnvFactory(self.env, atari=self.atari)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunConfig":
        nested = {"schedule": RunSchedule, "atari": AtariOptions, "ppo": PPOConfig,
                  "a2c": A2CConfig, "dqn": DQNConfig}
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            if f.name in nested:
                value = nested[f.name](**value)
            elif f.name == "hidden":
                value = tuple(value)
            kwargs[f.name] = value
        return cls(**kwargs)

    @classmethod
    def load(cls, run_dir: str) -> "RunConfig":
        path = os.path.join(run_dir, "config.json")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{run_dir!r} is not a run folder: no config.json in it")
        with open(path) as f:
            return cls.from_dict(json.load(f))


def preset(algo: str, env_id: str) -> dict[str, Any]:
    """Tuned defaults per (algorithm, env family); explicit user values override them.

    Classic control: rl-baselines3-zoo's CartPole settings. Atari: the PPO paper's Atari
    settings and the A2C/A3C paper's.
    """
    atari = is_atari(env_id)
    if algo == "ppo" and not atari:
        return {"n_envs": 8, "batch_T": 32, "ppo": dict(
            learning_rate=1e-3, anneal_lr=True, gamma=0.98, gae_lambda=0.8, epochs=20,
            minibatch_size=256, clip=0.2, anneal_clip=True, entropy_coef=0.0)}
    if algo == "ppo" and atari:
        return {"n_envs": 8, "batch_T": 128, "ppo": dict(
            learning_rate=2.5e-4, anneal_lr=True, optimizer_eps=1e-5, epochs=4,
            minibatch_size=256, clip=0.1, anneal_clip=True, value_clip=0.1,
            entropy_coef=0.01)}
    if algo == "a2c" and not atari:
        return {"n_envs": 8, "batch_T": 5, "a2c": dict(learning_rate=7e-4, entropy_coef=0.0)}
    if algo == "a2c" and atari:
        return {"n_envs": 16, "batch_T": 5, "a2c": dict(
            learning_rate=7e-4, entropy_coef=0.01, value_coef=0.25)}
    if algo == "dqn" and not atari:
        # zoo CartPole: train every 256 steps with 128 gradient steps (replay ratio 0.5).
        return {"n_envs": 1, "batch_T": 256, "hidden": (256, 256), "dqn": dict(
            learning_rate=2.3e-3, batch_size=64, replay_capacity=100_000,
            learning_starts=1000, gamma=0.99, target_update_interval=10, replay_ratio=0.5,
            exploration_fraction=0.16, epsilon_final=0.04, max_grad_norm=10.0)}
    if algo == "dqn" and atari:
        # zoo Atari: train every 4 steps per env, target every 1000 steps, 100k replay.
        return {"n_envs": 8, "batch_T": 4, "dqn": dict(
            learning_rate=1e-4, batch_size=32, replay_capacity=100_000,
            learning_starts=100_000, target_update_interval=1000, replay_ratio=0.25,
            exploration_fraction=0.1, epsilon_final=0.01, optimizer_eps=1.5e-4)}
    return {}


def apply_overrides(config: RunConfig, overrides: dict[str, Any]) -> RunConfig:
    """Set top-level fields and nested ones (``{'ppo': {...}}``) from a plain dict."""
    for key, value in overrides.items():
        current = getattr(config, key)
        if dataclasses.is_dataclass(current) and isinstance(value, dict):
            setattr(config, key, dataclasses.replace(current, **value))
        else:
            setattr(config, key, value)
    return config


def build_agent(config: RunConfig, spaces: EnvSpaces) -> ActorCriticAgent | DqnAgent:
    if config.algo == "dqn":
        return DqnAgent.build(spaces, config.n_envs, config.model, config.hidden,
                              config.dqn.dueling, device=config.device)
    return ActorCriticAgent.build(spaces, config.model, config.hidden, device=config.device,
                                  algo=config.algo)


def build_algo(config: RunConfig) -> PPO | A2C | DQN:
    kinds = {"ppo": PPO, "a2c": A2C, "dqn": DQN}
    return kinds[config.algo](config.algo_config())


def build_sampler(config: RunConfig, env_factory: EnvFactory):
    """The sampler named by ``config.sampler``; every kind fills the same ``Samples``."""
    common = dict(batch_T=config.batch_T, batch_B=config.n_envs, seed=config.seed,
                  n_eval_envs=config.n_eval_envs)
    if config.sampler == "serial":
        return SerialSampler(env_factory, **common)
    if config.sampler == "native":
        return NativeAtariSampler(env_factory, n_threads=config.n_workers, **common)
    parallel = dict(n_workers=config.n_workers, pin_cpus=config.pin_cpus,
                    start_method=config.start_method)
    kinds = {"cpu": ParallelCpuSampler, "gpu": ParallelGpuSampler,
             "alternating": AlternatingSampler}
    return kinds[config.sampler](env_factory, **common, **parallel)


def build_runner(config: RunConfig, log_dir: str | None, resume: bool = False,
                 progress: bool = True, stdout: bool = True) -> SyncRunner:
    """Validate, seed, and compose agent + sampler + algorithm into a runner."""
    from rlfw.launch.checkpoint import seed_everything

    config.validate()
    seed_everything(config.seed)  # model init depends on it
    env_factory = config.env_factory()
    spaces = EnvSpaces.of(env_factory)
    agent = build_agent(config, spaces)
    algo = build_algo(config)
    sampler = build_sampler(config, env_factory)
    return SyncRunner(algo, agent, sampler, config.schedule, log_dir=log_dir, seed=config.seed,
                      config=config.to_dict(), resume=resume, progress=progress, stdout=stdout)
