"""Value-based algorithms."""

from rlfw.algos.dqn.categorical import C51, C51Config
from rlfw.algos.dqn.dqn import DQN, DQNConfig
from rlfw.algos.dqn.pqn import PQN, PQNConfig, q_lambda_targets
from rlfw.algos.dqn.r2d1 import R2D1, R2D1Config

__all__ = [
    "C51",
    "C51Config",
    "DQN",
    "DQNConfig",
    "PQN",
    "PQNConfig",
    "R2D1",
    "R2D1Config",
    "q_lambda_targets",
]
