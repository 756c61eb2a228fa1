"""Algorithms: turn samples into gradient updates of an agent (contract: ``algos.base``)."""

from rlfw.algos.base import Algorithm, ReplayAlgorithm
from rlfw.algos.dqn import C51, DQN, PQN, R2D1, C51Config, DQNConfig, PQNConfig, R2D1Config
from rlfw.algos.pg import A2C, APPO, IMPALA, PPO, A2CConfig, APPOConfig, IMPALAConfig, PPOConfig
from rlfw.algos.qpg import DDPG, SAC, TD3, DDPGConfig, SACConfig, TD3Config

__all__ = [
    "A2C",
    "A2CConfig",
    "APPO",
    "APPOConfig",
    "Algorithm",
    "C51",
    "C51Config",
    "DDPG",
    "DDPGConfig",
    "DQN",
    "DQNConfig",
    "IMPALA",
    "IMPALAConfig",
    "PPO",
    "PPOConfig",
    "PQN",
    "PQNConfig",
    "R2D1",
    "R2D1Config",
    "ReplayAlgorithm",
    "SAC",
    "SACConfig",
    "TD3",
    "TD3Config",
]
