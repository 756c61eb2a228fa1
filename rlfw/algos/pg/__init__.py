"""Policy-gradient algorithms."""

from rlfw.algos.pg.a2c import A2C, A2CConfig
from rlfw.algos.pg.gae import generalized_advantages
from rlfw.algos.pg.ppo import PPO, PPOConfig

__all__ = ["A2C", "A2CConfig", "PPO", "PPOConfig", "generalized_advantages"]
