"""What declares an algorithm to the rest of rlfw (``AlgoSpec``): its class, its config
dataclass, the agent it trains and the model settings that agent reads, and its presets.
Each family declares its algorithms' specs beside their code (``rlfw.algos.<family>.spec``);
``rlfw.registry`` only collects them, so nothing outside an algorithm's folder names it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym

from rlfw.agents.base import Agent
from rlfw.algos.base import Algorithm, ReplayAlgorithm
from rlfw.algos.search_space import Param
from rlfw.envs import EnvSpaces
from rlfw.models.cnn import model_kind

# An algorithm's tuned settings for (env id, env family): overrides of ``RunConfig`` fields,
# its own config as ``{name: {...}}``, schedule fields as ``{"schedule": {...}}``.
Preset = Callable[[str, str], dict[str, Any]]

# The RunConfig fields that shape an agent's network, whose use depends on the algorithm and
# on the env's spaces; (run config, spaces) -> {field it would not read: why}.
MODEL_SETTINGS = (
    "hidden",
    "activation",
    "log_std_init",
    "ortho_init",
    "sde_sample_freq",
    "rnn_size",
)
UnreadSettings = Callable[[Any, EnvSpaces], dict[str, str]]

# (run config, env spaces) -> the agent the algorithm trains. The run config is
# ``rlfw.launch.config.RunConfig`` (a layer above): builders read its model settings
# (``MODEL_SETTINGS``, ``model``, ``device``...) and their own config (``algo_config()``).
AgentBuilder = Callable[[Any, EnvSpaces], Agent]

# An algorithm class as called: ``algo_cls(config)`` with its own config dataclass, which
# ``type[Algorithm]`` cannot state (the base declares no constructor: each names its config).
AlgoConstructor = Callable[[Any], Algorithm]


def no_preset(env_id: str, family: str) -> dict[str, Any]:
    return {}


def reads_every_setting(config: Any, spaces: EnvSpaces) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class AlgoSpec:
    """An algorithm: its class (built as ``algo_cls(config)``), its config dataclass,
    ``build_agent(run_config, spaces)`` for the agent it trains, ``preset(env_id,
    family)``: its tuned settings for an env, ``unread_model_settings(run_config,
    spaces)``: the model fields (``MODEL_SETTINGS``) ``build_agent`` would not read for that
    env, each with why (a user's setting of one is refused, as it would change nothing),
    and ``search_space``: what ``rlfw tune`` searches."""

    name: str
    algo_cls: type[Algorithm]
    config_cls: type
    build_agent: AgentBuilder
    summary: str = ""
    preset: Preset = no_preset
    unread_model_settings: UnreadSettings = reads_every_setting
    search_space: tuple[Param, ...] = ()
    """What ``rlfw tune`` searches by default (``rlfw.algos.search_space``)."""

    @property
    def uses_replay(self) -> bool:
        """It learns from a replay (off-policy), not from each batch once (on-policy)."""
        return issubclass(self.algo_cls, ReplayAlgorithm)


def image_network_note(config: Any, spaces: EnvSpaces) -> str | None:
    """Why ``hidden`` and ``activation`` go unread (the network is the CNN for the
    observations' image size), or None when the network is an MLP."""
    obs = spaces.observation
    if (
        not isinstance(obs, gym.spaces.Box)
        or model_kind(config.model, obs.shape, obs.dtype) != "cnn"
    ):
        return None
    return (
        f"with model={config.model!r} the network for {config.env}'s "
        f"{list(obs.shape)} images is the CNN for their size, whose layers are fixed; "
        "hidden and activation shape MLPs (model=mlp)"
    )
