"""Policy-gradient algorithms: PPO and A2C, their V-trace forms APPO and IMPALA, and
PPO for many agents (IPPO, MAPPO)."""

from rlfw.algos.pg.a2c import A2C, A2CConfig
from rlfw.algos.pg.appo import APPO, APPOConfig
from rlfw.algos.pg.gae import generalized_advantages
from rlfw.algos.pg.impala import IMPALA, IMPALAConfig
from rlfw.algos.pg.mappo import IPPO, MAPPO, IPPOConfig, MAPPOConfig
from rlfw.algos.pg.ppo import PPO, PPOConfig
from rlfw.algos.pg.vtrace import vtrace

__all__ = [
    "A2C",
    "A2CConfig",
    "APPO",
    "APPOConfig",
    "IMPALA",
    "IMPALAConfig",
    "IPPO",
    "IPPOConfig",
    "MAPPO",
    "MAPPOConfig",
    "PPO",
    "PPOConfig",
    "generalized_advantages",
    "vtrace",
]
