"""The network settings a run declares, with their defaults written once: ``RunConfig``'s
fields of these names (where their help lives) and every agent and model builder's
keyword defaults read them from here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelDefaults:
    """The default of each network setting (see ``RunConfig`` for what each means)."""

    model: str = "auto"
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    log_std_init: float = 0.0
    ortho_init: bool = True
    sde_sample_freq: int = 0
    recurrent: str | None = None
    rnn_size: int = 128
    rnn_critic: bool = False
    device: str = "cpu"
    normalize_obs: bool = False
    obs_clip: float = 10.0
    obs_norm_update: str = "batch"


MODEL_DEFAULTS = ModelDefaults()
