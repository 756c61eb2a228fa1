"""Value-based algorithms."""
from rlfw.algos.dqn.dqn import DQN, DQNConfig

__all__ = ["DQN", "DQNConfig"]
