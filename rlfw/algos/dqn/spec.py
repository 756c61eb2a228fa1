"""DQN, C51, Rainbow, R2D1 and PQN as rlfw knows them: their configs, the Q-learning agents they
train, the model settings those read, and their presets."""

from __future__ import annotations

from typing import Any

from rlfw.agents.dqn_agent import DqnAgent, RecurrentDqnAgent, check_discrete_actions
from rlfw.algos.base import Algorithm
from rlfw.algos.dqn.categorical import C51, C51Config
from rlfw.algos.dqn.dqn import DQN, DQNConfig
from rlfw.algos.dqn.pqn import PQN, PQNConfig
from rlfw.algos.dqn.presets import (
    c51_preset,
    dqn_preset,
    pqn_preset,
    r2d1_preset,
    rainbow_preset,
)
from rlfw.algos.dqn.r2d1 import R2D1, R2D1Config
from rlfw.algos.dqn.search import DQN_SPACE
from rlfw.algos.search_space import Param
from rlfw.algos.spec import AgentBuilder, AlgoSpec, Preset, UnreadSettings, image_network_note
from rlfw.envs import EnvSpaces
from rlfw.envs.masks import masks_actions


def q_network_unread(config: Any, spaces: EnvSpaces) -> dict[str, str]:
    """The model settings the Q-learners' agents (``build_dqn_agent``,
    ``build_r2d1_agent``) ignore on ``spaces``' env."""
    unread = {
        "activation": f"{config.algo}'s Q-network uses ReLU; activation is for ppo's "
        "and a2c's MLPs",
        "log_std_init": f"{config.algo} has no Gaussian policy",
        "sde_sample_freq": f"{config.algo} has no Gaussian policy to explore with gSDE",
        "ortho_init": f"{config.algo}'s Q-network has its own initialization (its "
        "CNN orthogonal, its MLP PyTorch's); ortho_init is for ppo's and "
        "a2c's MLP",
        "rnn_size": f"{config.algo}'s Q-network has no recurrent core (r2d1's has)",
    }
    image = image_network_note(config, spaces)
    if image:
        unread["hidden"] = image
    return unread


def recurrent_q_network_unread(config: Any, spaces: EnvSpaces) -> dict[str, str]:
    """The model settings ``build_r2d1_agent`` ignores: the Q-learners' (its LSTM reads
    ``rnn_size``)."""
    unread = q_network_unread(config, spaces)
    del unread["rnn_size"]
    return unread


def build_dqn_agent(config: Any, spaces: EnvSpaces) -> DqnAgent:
    """The Q-learning agent of any feed-forward Q-learner (its config: ε at evaluation,
    and where it has them the dueling head, C51's support, PQN's layer norm)."""
    own = config.algo_config()
    return DqnAgent.build(
        spaces,
        config.batch_B,
        config.model,
        config.hidden,
        getattr(own, "dueling", False),
        device=config.device,
        eval_epsilon=own.eval_epsilon,
        atoms=getattr(own, "atoms", 1),
        v_min=getattr(own, "v_min", -10.0),
        v_max=getattr(own, "v_max", 10.0),
        action_mask=masks_actions(spaces.observation, config.env_options.action_mask),
        layer_norm=getattr(own, "layer_norm", False),
    )


def build_r2d1_agent(config: Any, spaces: EnvSpaces) -> RecurrentDqnAgent:
    """R2D1's agent: ε-greedy over an LSTM Q-network (MLP or CNN torso, dueling head)."""
    own = config.algo_config()
    if masks_actions(spaces.observation, config.env_options.action_mask):
        raise ValueError(
            f"r2d1 does not act over an action mask, and {config.env}'s observation has "
            "one: use dqn, c51, rainbow, ppo or a2c, or set env_options.action_mask=none"
        )
    return RecurrentDqnAgent.build_recurrent(
        spaces,
        config.batch_B,
        config.rnn_size,
        config.hidden,
        own.dueling,
        config.device,
        own.eval_epsilon,
        config.model,
    )


def pqn_network_unread(config: Any, spaces: EnvSpaces) -> dict[str, str]:
    """The model settings ``build_pqn_agent`` ignores: the Q-learners' (its MLP is
    initialized orthogonally, as its CNN)."""
    unread = q_network_unread(config, spaces)
    unread["ortho_init"] = (
        "pqn's Q-network is initialized orthogonally (its output layer PyTorch's); "
        "ortho_init is for ppo's and a2c's MLP"
    )
    return unread


def build_pqn_agent(config: Any, spaces: EnvSpaces) -> DqnAgent:
    """PQN's agent: ε-greedy over a Q-network with a LayerNorm before each hidden ReLU
    (its config's ``layer_norm``), no dueling head; feed-forward only."""
    check_discrete_actions(spaces.action, "pqn")  # named for pqn, before the build's check
    if config.recurrent is not None:
        raise ValueError(
            f"recurrent={config.recurrent!r} is for ppo and a2c; pqn has no recurrent "
            "agent (r2d1 is the recurrent Q-learner): set recurrent=none"
        )
    return build_dqn_agent(config, spaces)


def _q_learner(
    name: str,
    algo_cls: type[Algorithm],
    config_cls: type,
    preset: Preset,
    build_agent: AgentBuilder = build_dqn_agent,
    summary: str = "",
    unread: UnreadSettings = q_network_unread,
    search_space: tuple[Param, ...] = (),
) -> AlgoSpec:
    return AlgoSpec(name, algo_cls, config_cls, build_agent, summary, preset, unread, search_space)


SPECS = (
    _q_learner("dqn", DQN, DQNConfig, dqn_preset, search_space=DQN_SPACE),
    _q_learner("c51", C51, C51Config, c51_preset),
    _q_learner(
        "rainbow",
        C51,
        C51Config,
        rainbow_preset,
        summary="Rainbow minus noisy nets: C51 with 3-step double-Q targets, a dueling "
        "head and prioritized replay (rlfw/algos/dqn/presets.py)",
    ),
    _q_learner(
        "r2d1",
        R2D1,
        R2D1Config,
        r2d1_preset,
        build_agent=build_r2d1_agent,
        unread=recurrent_q_network_unread,
    ),
    _q_learner(
        "pqn",
        PQN,
        PQNConfig,
        pqn_preset,
        build_agent=build_pqn_agent,
        unread=pqn_network_unread,
    ),
)
