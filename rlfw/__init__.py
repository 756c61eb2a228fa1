"""rlfw: modular deep RL with interchangeable samplers over one [T, B] buffer."""

from rlfw.agents import ActorCriticAgent, Agent
from rlfw.agents.dqn_agent import DqnAgent
from rlfw.algos import (
    A2C,
    APPO,
    C51,
    DDPG,
    DQN,
    IMPALA,
    PPO,
    PQN,
    R2D1,
    SAC,
    TD3,
    A2CConfig,
    APPOConfig,
    C51Config,
    DDPGConfig,
    DQNConfig,
    IMPALAConfig,
    PPOConfig,
    PQNConfig,
    R2D1Config,
    SACConfig,
    TD3Config,
)
from rlfw.buffers import AgentInfo, QInfo, Samples
from rlfw.envs import AtariOptions, EnvFactory, EnvSpaces, make_env
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig
from rlfw.registry import register_algo, register_runner, register_sampler
from rlfw.runners import AsyncRunner, ConcurrentRunner, Runner, RunSchedule, SyncRunner
from rlfw.samplers import (
    AlternatingSampler,
    EvalLimits,
    NativeAtariSampler,
    ParallelCpuSampler,
    ParallelGpuSampler,
    QueueSampler,
    SerialSampler,
    WorkerError,
)
from rlfw.utils.checks import NonFiniteError
from rlfw.utils.seeding import seed_everything

__version__ = "0.1.0"

__all__ = [
    "A2C",
    "A2CConfig",
    "APPO",
    "APPOConfig",
    "ActorCriticAgent",
    "Agent",
    "AgentInfo",
    "AlternatingSampler",
    "AsyncRunner",
    "AtariOptions",
    "C51",
    "C51Config",
    "ConcurrentRunner",
    "DDPG",
    "DDPGConfig",
    "DQN",
    "DQNConfig",
    "DqnAgent",
    "IMPALA",
    "IMPALAConfig",
    "EnvFactory",
    "EnvSpaces",
    "EvalLimits",
    "NativeAtariSampler",
    "NonFiniteError",
    "PPO",
    "PPOConfig",
    "PQN",
    "PQNConfig",
    "ParallelCpuSampler",
    "ParallelGpuSampler",
    "QInfo",
    "QueueSampler",
    "R2D1",
    "R2D1Config",
    "RunConfig",
    "RunSchedule",
    "Runner",
    "SAC",
    "SACConfig",
    "Samples",
    "SerialSampler",
    "SyncRunner",
    "TD3",
    "TD3Config",
    "WorkerError",
    "build_runner",
    "make_env",
    "register_algo",
    "register_runner",
    "register_sampler",
    "seed_everything",
]
