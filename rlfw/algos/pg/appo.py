"""Asynchronous PPO as Sample Factory runs it (Petrenko et al., 2020): PPO's clipped
surrogate and epochs on V-trace targets, for batches sampled by older weights."""

from __future__ import annotations

from dataclasses import dataclass

from rlfw.algos.pg.common import require_vtrace
from rlfw.algos.pg.ppo import PPO, PPOConfig


@dataclass
class APPOConfig(PPOConfig):
    """APPO's settings: PPO's, with V-trace advantages and value targets."""

    advantage: str = "vtrace"
    """The advantage estimator: APPO's is 'vtrace' (for GAE use --algo ppo)."""

    def validate(self) -> None:
        super().validate()
        require_vtrace(self, "appo", "ppo")


class APPO(PPO):
    """APPO: per epoch, V-trace targets from the current policy and values; then PPO's
    shuffled minibatches of the clipped surrogate, whose ratio is against the sampling
    policy's stored log-probs."""

    config: APPOConfig

    @classmethod
    def default_config(cls) -> APPOConfig:
        return APPOConfig()
