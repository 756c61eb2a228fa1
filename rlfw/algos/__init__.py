"""Algorithms: turn samples into gradient updates of an agent."""
from rlfw.algos.pg import A2C, PPO, A2CConfig, PPOConfig

ALGOS = ("ppo", "a2c")

__all__ = ["A2C", "A2CConfig", "ALGOS", "PPO", "PPOConfig"]
