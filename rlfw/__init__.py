"""rlfw: modular deep RL with interchangeable samplers over one [T, B] buffer."""
from rlfw.agents import ActorCriticAgent
from rlfw.algos import A2C, PPO, A2CConfig, PPOConfig
from rlfw.buffers import AgentInfo, Samples
from rlfw.envs import AtariOptions, EnvFactory, EnvSpaces, make_env
from rlfw.runners import RunSchedule, SyncRunner
from rlfw.samplers import SerialSampler

__version__ = "0.1.0"

__all__ = ["A2C", "A2CConfig", "ActorCriticAgent", "AgentInfo", "AtariOptions", "EnvFactory",
           "EnvSpaces", "PPO", "PPOConfig", "RunSchedule", "Samples", "SerialSampler",
           "SyncRunner", "make_env"]
