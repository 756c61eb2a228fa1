"""An algorithm registered from outside rlfw whose config declares a flag of its own: PPO
with one more setting. Imported by --plugin, its flag is on rlfw train's command line."""

from dataclasses import dataclass
from typing import Annotated

from rlfw.algos import PPO, PPOConfig
from rlfw.algos.pg.spec import build_actor_critic
from rlfw.registry import register_algo
from rlfw.utils.settings import Flag


@dataclass
class FlaggedPPOConfig(PPOConfig):
    knob: Annotated[int, Flag("--flagged-knob")] = 3
    """A setting only this algorithm has."""


register_algo("flagged", PPO, FlaggedPPOConfig, build_actor_critic, replace=True)
