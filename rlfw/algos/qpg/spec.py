"""SAC, TD3 and DDPG as rlfw knows them: their configs, the actor and critics they train,
the model settings those read, and their presets."""

from __future__ import annotations

from typing import Any

from rlfw.agents.qpg_agent import QpgAgent
from rlfw.algos.base import Algorithm
from rlfw.algos.qpg.presets import ddpg_preset, sac_preset, td3_preset
from rlfw.algos.qpg.sac import SAC, SACConfig
from rlfw.algos.qpg.td3 import DDPG, TD3, DDPGConfig, TD3Config
from rlfw.algos.spec import AlgoSpec, Preset
from rlfw.envs import EnvSpaces


def build_qpg_agent(config: Any, spaces: EnvSpaces) -> QpgAgent:
    """The agent of SAC (a squashed Gaussian actor), TD3 and DDPG (a deterministic actor
    exploring with ``action_noise``), with ``n_critics`` Q-functions."""
    own = config.algo_config()
    return QpgAgent.build(
        spaces,
        "squashed_gaussian" if isinstance(own, SACConfig) else "deterministic",
        config.algo,
        config.model,
        config.hidden,
        own.critic_hidden,
        own.n_critics,
        config.activation,
        getattr(own, "action_noise", 0.0),
        config.device,
        config.normalize_obs,
        config.obs_clip,
        config.sde_sample_freq,
        config.log_std_init,
        getattr(own, "sde_expln", False),
    )


def qpg_unread(config: Any, spaces: EnvSpaces) -> dict[str, str]:
    """The model settings ``build_qpg_agent`` ignores."""
    unread = {
        "ortho_init": f"{config.algo}'s networks have PyTorch's default initialization, "
        "as SB3's; ortho_init is for ppo's and a2c's MLP",
        "rnn_size": f"{config.algo}'s networks have no recurrent core",
    }
    if not config.sde_sample_freq:
        unread["log_std_init"] = (
            f"{config.algo}'s policy has no state-independent log-std without gSDE (SAC's "
            "comes from a head of the network; TD3's and DDPG's is deterministic)"
        )
    return unread


def _qpg(name: str, algo_cls: type[Algorithm], config_cls: type, preset: Preset) -> AlgoSpec:
    return AlgoSpec(
        name,
        algo_cls,
        config_cls,
        build_qpg_agent,
        preset=preset,
        unread_model_settings=qpg_unread,
    )


SPECS = (
    _qpg("sac", SAC, SACConfig, sac_preset),
    _qpg("td3", TD3, TD3Config, td3_preset),
    _qpg("ddpg", DDPG, DDPGConfig, ddpg_preset),
)
