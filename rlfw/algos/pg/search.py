"""PPO's and A2C's default search spaces for ``rlfw tune``: rl-baselines3-zoo's
(``rl_zoo3/hyperparams_opt.py``, ``sample_ppo_params`` and ``sample_a2c_params``), on
rlfw's keys. The zoo's ``n_steps`` (per env) is ``batch_T``; its ``net_arch`` tiny /
small / medium are ``hidden`` (64,), (64, 64), (256, 256)."""

from __future__ import annotations

from rlfw.algos.search_space import Param

_NETS = Param("hidden", choices=((64,), (64, 64), (256, 256)))
_ACTIVATIONS = Param("activation", choices=("tanh", "relu"))


def _shared(algo: str) -> tuple[Param, ...]:
    """The settings both samplers draw the same way."""
    return (
        Param(f"{algo}.gamma", 1e-4, 0.03, log=True, transform="one_minus"),
        Param(f"{algo}.gae_lambda", 1e-4, 0.1, log=True, transform="one_minus"),
        Param(f"{algo}.learning_rate", 1e-5, 2e-3, log=True),
        Param(f"{algo}.entropy_coef", 1e-8, 0.1, log=True),
        Param(f"{algo}.max_grad_norm", 0.3, 2.0),
        _ACTIVATIONS,
    )


PPO_SPACE = (
    Param("batch_T", 5, 12, integer=True, transform="pow2"),
    Param("ppo.minibatch_size", 2, 10, integer=True, transform="pow2"),
    *_shared("ppo"),
    Param("ppo.clip", choices=(0.1, 0.2, 0.3, 0.4)),
    Param("ppo.epochs", choices=(1, 5, 10, 20)),
    _NETS,
)

A2C_SPACE = (
    Param("batch_T", choices=(32, 64, 128, 256, 512, 1024, 2048)),
    *_shared("a2c"),
    Param("hidden", choices=((64, 64), (256, 256))),
)
