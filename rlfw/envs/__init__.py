"""Environment layer: gymnasium ids by name, Atari preprocessing, seeding, episode stats."""
from rlfw.envs.atari import AtariOptions
from rlfw.envs.factory import EnvFactory, check_env_id, is_atari, is_mujoco, make_env
from rlfw.envs.spaces import EnvSpaces

__all__ = ["AtariOptions", "EnvFactory", "EnvSpaces", "check_env_id", "is_atari", "is_mujoco",
           "make_env"]
