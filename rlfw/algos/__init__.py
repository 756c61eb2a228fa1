"""Algorithms: turn samples into gradient updates of an agent (contract: ``algos.base``)."""

from rlfw.algos.base import Algorithm, ReplayAlgorithm
from rlfw.algos.dqn import DQN, DQNConfig
from rlfw.algos.pg import A2C, PPO, A2CConfig, PPOConfig

__all__ = [
    "A2C",
    "A2CConfig",
    "Algorithm",
    "DQN",
    "DQNConfig",
    "PPO",
    "PPOConfig",
    "ReplayAlgorithm",
]
