"""Algorithms: turn samples into gradient updates of an agent."""
from rlfw.algos.dqn import DQN, DQNConfig
from rlfw.algos.pg import A2C, PPO, A2CConfig, PPOConfig

ALGOS = ("ppo", "a2c", "dqn")

__all__ = ["A2C", "A2CConfig", "ALGOS", "DQN", "DQNConfig", "PPO", "PPOConfig"]
