"""Which family an env id belongs to: what presets and the network choice key on."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlfw.envs.factory import is_atari, is_mujoco
from rlfw.envs.minatar import is_minatar
from rlfw.envs.minigrid import is_minigrid
from rlfw.envs.multiagent import is_pettingzoo
from rlfw.envs.robotics import is_robotics

FAMILIES = (
    "atari",
    "minatar",
    "minigrid",
    "robotics",
    "mujoco",
    "continuous",
    "classic",
    "multiagent",
)


def env_family(env_id: str) -> str:
    """'atari', 'minatar', 'minigrid', 'mujoco', 'continuous' (other Box-action envs),
    'multiagent' (a PettingZoo env module) or 'classic'."""
    if is_pettingzoo(env_id):
        return "multiagent"
    if is_atari(env_id):
        return "atari"
    if is_minatar(env_id):
        return "minatar"
    if is_minigrid(env_id):
        return "minigrid"
    if is_robotics(env_id):
        return "robotics"
    if is_mujoco(env_id):
        return "mujoco"
    if env_id in gym.registry:
        try:
            env = gym.make(env_id)
        except Exception:  # unusable here: validation reports why, the preset need not
            return "classic"
        continuous = isinstance(env.action_space, gym.spaces.Box)
        env.close()
        return "continuous" if continuous else "classic"
    return "classic"


def base_name(env_id: str) -> str:
    """'HalfCheetah' of 'HalfCheetah-v5' (and of 'ALE/Pong-v5': 'Pong'; of
    'mpe2.simple_spread_v3': 'simple_spread')."""
    if is_pettingzoo(env_id):
        return env_id.rsplit(".", 1)[-1].rsplit("_v", 1)[0]
    return env_id.split("/")[-1].rsplit("-v", 1)[0]


def merge_settings(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``, one level of groups deep (``{'ppo': {...}}`` merge)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = {**out[key], **value} if isinstance(value, dict) and key in out else value
    return out
