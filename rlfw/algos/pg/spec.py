"""PPO, A2C and their V-trace forms (APPO, IMPALA) as rlfw knows them: their configs, the
actor-critic agent they train, the model settings it reads, and their presets."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlfw.agents import ActorCriticAgent
from rlfw.algos.pg.a2c import A2C, A2CConfig
from rlfw.algos.pg.appo import APPO, APPOConfig
from rlfw.algos.pg.impala import IMPALA, IMPALAConfig
from rlfw.algos.pg.ppo import PPO, PPOConfig
from rlfw.algos.pg.presets import a2c_preset, appo_preset, impala_preset, ppo_preset
from rlfw.algos.spec import AlgoSpec, image_network_note
from rlfw.envs import EnvSpaces
from rlfw.envs.masks import masks_actions


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
    ),
    AlgoSpec(
        "a2c",
        A2C,
        A2CConfig,
        build_actor_critic,
        preset=a2c_preset,
        unread_model_settings=actor_critic_unread,
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
        "impala",
        IMPALA,
        IMPALAConfig,
        build_actor_critic,
        preset=impala_preset,
        unread_model_settings=actor_critic_unread,
    ),
)
