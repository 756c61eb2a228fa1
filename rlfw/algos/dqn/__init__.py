"""Value-based algorithms."""

from rlfw.algos.dqn.categorical import C51, C51Config
from rlfw.algos.dqn.dqn import DQN, DQNConfig

__all__ = ["C51", "C51Config", "DQN", "DQNConfig"]
