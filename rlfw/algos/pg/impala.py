"""IMPALA's learner (Espeholt et al., 2018): A2C's single gradient step per batch on
V-trace targets, which correct for the batch having been sampled by older weights."""

from __future__ import annotations

from dataclasses import dataclass

from rlfw.algos.pg.a2c import A2C, A2CConfig
from rlfw.algos.pg.common import require_vtrace


@dataclass
class IMPALAConfig(A2CConfig):
    """IMPALA's settings: A2C's, with V-trace advantages and value targets."""

    advantage: str = "vtrace"
    """The advantage estimator: IMPALA's is 'vtrace' (for GAE use --algo a2c)."""

    def validate(self) -> None:
        super().validate()
        require_vtrace(self, "impala", "a2c")


class IMPALA(A2C):
    """IMPALA's learner: per batch, V-trace targets from the current policy and values
    against the sampling policy's stored log-probs, then one gradient step on A2C's loss
    (policy, value, entropy)."""

    config: IMPALAConfig

    @classmethod
    def default_config(cls) -> IMPALAConfig:
        return IMPALAConfig()
