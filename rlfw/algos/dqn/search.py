"""DQN's default search space for ``rlfw tune``: rl-baselines3-zoo's
(``rl_zoo3/hyperparams_opt.py``, ``sample_dqn_params``) on rlfw's keys. The zoo's
train_freq / gradient_steps pair is rlfw's ``replay_ratio`` (updates per env step);
its ``net_arch`` small / medium / big are ``hidden`` (64, 64), (256, 256), (256, 256, 256)."""

from __future__ import annotations

from rlfw.algos.search_space import Param

DQN_SPACE = (
    Param("dqn.gamma", 1e-4, 0.03, log=True, transform="one_minus"),
    Param("dqn.batch_size", 2, 11, integer=True, transform="pow2"),
    Param("dqn.learning_rate", 1e-5, 2e-3, log=True),
    Param("dqn.replay_ratio", 0.1, 1.0),
    Param("dqn.epsilon_final", 0.0, 0.2),
    Param("dqn.exploration_fraction", 0.01, 0.5),
    Param("dqn.target_update_interval", 1, 20_000, log=True, integer=True),
    Param("hidden", choices=((64, 64), (256, 256), (256, 256, 256))),
)
