"""rlfw: modular deep RL with interchangeable samplers over one [T, B] buffer."""

from rlfw.agents import ActorCriticAgent, Agent
from rlfw.agents.dqn_agent import DqnAgent
from rlfw.algos import A2C, DQN, PPO, A2CConfig, DQNConfig, PPOConfig
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
    "ActorCriticAgent",
    "Agent",
    "AgentInfo",
    "AlternatingSampler",
    "AsyncRunner",
    "AtariOptions",
    "ConcurrentRunner",
    "DQN",
    "DQNConfig",
    "DqnAgent",
    "EnvFactory",
    "EnvSpaces",
    "EvalLimits",
    "NativeAtariSampler",
    "NonFiniteError",
    "PPO",
    "PPOConfig",
    "ParallelCpuSampler",
    "ParallelGpuSampler",
    "QInfo",
    "QueueSampler",
    "RunConfig",
    "RunSchedule",
    "Runner",
    "Samples",
    "SerialSampler",
    "SyncRunner",
    "WorkerError",
    "build_runner",
    "make_env",
    "register_algo",
    "register_runner",
    "register_sampler",
    "seed_everything",
]
