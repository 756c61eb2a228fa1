"""The Q-function policy-gradient family (rlpyt's third): SAC, TD3 and DDPG."""

from rlfw.algos.qpg.base import QFunctionPolicyGradient, QpgConfig
from rlfw.algos.qpg.sac import SAC, SACConfig
from rlfw.algos.qpg.td3 import DDPG, TD3, DDPGConfig, TD3Config

__all__ = [
    "DDPG",
    "DDPGConfig",
    "QFunctionPolicyGradient",
    "QpgConfig",
    "SAC",
    "SACConfig",
    "TD3",
    "TD3Config",
]
