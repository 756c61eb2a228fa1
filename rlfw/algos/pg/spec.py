"""PPO, A2C and their V-trace forms (APPO, IMPALA) as rlfw knows them: their configs, the
actor-critic agent they train, the model settings it reads, and their presets."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlfw.agents import ActorCriticAgent
from rlfw.agents.actor_critic import distribution_for
from rlfw.agents.distributions import DiagGaussian
from rlfw.algos.pg.a2c import A2C, A2CConfig
from rlfw.algos.pg.appo import APPO, APPOConfig
from rlfw.algos.pg.impala import IMPALA, IMPALAConfig
from rlfw.algos.pg.mappo import IPPO, MAPPO, IPPOConfig, MAPPOConfig
from rlfw.algos.pg.ppo import PPO, PPOConfig
from rlfw.algos.pg.presets import (
    a2c_preset,
    appo_preset,
    impala_preset,
    ippo_preset,
    mappo_preset,
    ppo_preset,
)
from rlfw.algos.pg.search import A2C_SPACE, PPO_SPACE
from rlfw.algos.spec import AlgoSpec, image_network_note
from rlfw.envs import EnvSpaces
from rlfw.envs.masks import masks_actions
from rlfw.models.actor_critic import CentralCriticActorCritic


def build_actor_critic(config: Any, spaces: EnvSpaces) -> ActorCriticAgent:
    """The actor-critic agent (MLP, CNN or recurrent; categorical, multi-categorical,
    Bernoulli or Gaussian policy) that a policy-gradient algorithm trains."""
    return ActorCriticAgent.build(
        spaces,
        config.model,
        config.hidden,
        device=config.device,
        algo=config.algo,
        normalize_obs=config.normalize_obs,
        obs_clip=config.obs_clip,
        activation=config.activation,
        log_std_init=config.log_std_init,
        recurrent=config.recurrent,
        rnn_size=config.rnn_size,
        rnn_critic=config.rnn_critic,
        ortho_init=config.ortho_init,
        obs_norm_update=config.obs_norm_update,
        sde_sample_freq=config.sde_sample_freq,
        action_mask=masks_actions(spaces.observation, config.env_options.action_mask),
    )


GLOBAL_STATE_KEYS = {"observation", "state", "agent"}


def build_central_critic(config: Any, spaces: EnvSpaces) -> ActorCriticAgent:
    """MAPPO's agent: the policy MLP on the agent's own observation, the critic MLP on the
    env's global state and the agent's id (``env_options.global_state``)."""
    obs = spaces.observation
    if not isinstance(obs, gym.spaces.Dict) or set(obs.spaces) != GLOBAL_STATE_KEYS:
        raise ValueError(
            f"{config.algo}'s critic reads the env's global state, and {config.env} observes "
            f"{obs}: run it on a PettingZoo env with env_options.global_state=true (its "
            "preset sets it)"
        )
    own, state = obs["observation"], obs["state"]
    if not isinstance(own, gym.spaces.Box) or not isinstance(state, gym.spaces.Box):
        raise ValueError(
            f"{config.algo}'s networks are MLPs over Box observations and states; "
            f"{config.env} gives {own} and {state}"
        )
    dist = distribution_for(spaces.action, config.algo)
    net = CentralCriticActorCritic(
        own.shape,
        state.shape,
        int(np.prod(obs["agent"].shape or (1,))),
        dist.n_params,
        config.hidden,
        config.activation,
        dist.dim if isinstance(dist, DiagGaussian) else 0,
        config.log_std_init,
    )
    return ActorCriticAgent(net, dist, spaces.action, config.device)


def central_critic_unread(config: Any, spaces: EnvSpaces) -> dict[str, str]:
    """The model settings ``build_central_critic`` ignores."""
    why = f"{config.algo}'s centralized-critic MLPs do not read it"
    unread = ("recurrent", "rnn_size", "normalize_obs", "ortho_init", "sde_sample_freq")
    return dict.fromkeys(unread, why)


def actor_critic_unread(config: Any, spaces: EnvSpaces) -> dict[str, str]:
    """The model settings ``build_actor_critic`` ignores on ``spaces``' env."""
    image = image_network_note(config, spaces)
    unread = dict.fromkeys(("hidden", "activation"), image) if image else {}
    if not isinstance(spaces.action, gym.spaces.Box):
        unread["log_std_init"] = (
            f"it is the initial log-std of Gaussian policies, and "
            f"{config.env}'s actions {spaces.action} are not a Box"
        )
        unread["sde_sample_freq"] = (
            f"it turns on gSDE exploration for Box actions, and "
            f"{config.env}'s actions {spaces.action} are not a Box"
        )
    if config.recurrent is None:
        unread["rnn_size"] = (
            f"it shapes {config.algo}'s recurrent core, and this run has none "
            "(recurrent=none): set recurrent=lstm or gru too"
        )
    if image or config.recurrent is not None:
        unread["ortho_init"] = (
            "it is for the feed-forward MLP actor-critic; CNN and "
            "recurrent networks are always initialized orthogonally"
        )
        unread.setdefault(
            "sde_sample_freq",
            "gSDE is for the feed-forward MLP actor-critic; "
            "CNN and recurrent networks explore with a "
            "plain Gaussian",
        )
    return unread


SPECS = (
    AlgoSpec(
        "ppo",
        PPO,
        PPOConfig,
        build_actor_critic,
        preset=ppo_preset,
        unread_model_settings=actor_critic_unread,
        search_space=PPO_SPACE,
    ),
    AlgoSpec(
        "a2c",
        A2C,
        A2CConfig,
        build_actor_critic,
        preset=a2c_preset,
        unread_model_settings=actor_critic_unread,
        search_space=A2C_SPACE,
    ),
    AlgoSpec(
        "appo",
        APPO,
        APPOConfig,
        build_actor_critic,
        preset=appo_preset,
        unread_model_settings=actor_critic_unread,
    ),
    AlgoSpec(
        "ippo",
        IPPO,
        IPPOConfig,
        build_actor_critic,
        preset=ippo_preset,
        unread_model_settings=actor_critic_unread,
    ),
    AlgoSpec(
        "mappo",
        MAPPO,
        MAPPOConfig,
        build_central_critic,
        preset=mappo_preset,
        unread_model_settings=central_critic_unread,
    ),
    AlgoSpec(
        "impala",
        IMPALA,
        IMPALAConfig,
        build_actor_critic,
        preset=impala_preset,
        unread_model_settings=actor_critic_unread,
    ),
)
