"""Environment layer: gymnasium ids by name, Atari preprocessing, seeding, episode stats."""

from rlfw.envs.atari import AtariOptions
from rlfw.envs.boards import CONNECT_FOUR, register_board_envs
from rlfw.envs.factory import (
    EnvFactory,
    EnvOptions,
    check_env_id,
    env_module,
    is_atari,
    is_mujoco,
    make_env,
)
from rlfw.envs.families import env_family
from rlfw.envs.minatar import is_minatar, register_minatar_envs
from rlfw.envs.partial import CARTPOLE_NO_VELOCITY, register_partial_envs
from rlfw.envs.spaces import EnvSpaces
from rlfw.envs.structured import (
    CARTPOLE_DICT,
    IDENTITY_MULTI_BINARY,
    IDENTITY_MULTI_DISCRETE,
    INVALID_ACTION_IDENTITY,
    register_structured_envs,
)

register_partial_envs()
register_board_envs()
register_structured_envs()
register_minatar_envs()

__all__ = [
    "CARTPOLE_DICT",
    "CONNECT_FOUR",
    "CARTPOLE_NO_VELOCITY",
    "IDENTITY_MULTI_BINARY",
    "IDENTITY_MULTI_DISCRETE",
    "INVALID_ACTION_IDENTITY",
    "AtariOptions",
    "EnvFactory",
    "EnvOptions",
    "EnvSpaces",
    "check_env_id",
    "env_family",
    "env_module",
    "is_atari",
    "is_minatar",
    "is_mujoco",
    "make_env",
]
