"""The base PPO and A2C share (``rlfw.algos.base.Algorithm`` is the contract it fulfils)."""

from __future__ import annotations

from rlfw.agents.base import Agent
from rlfw.algos.base import Algorithm
from rlfw.algos.optim import Replicas, flat_optimizer, gradient_sync
from rlfw.algos.pg.common import BatchNormalizers


class PolicyGradient(Algorithm):
    """What PPO and A2C share: the config check, the flat-parameter optimizer with the
    gradient average across replicas, per-batch reward/observation normalizers, and
    their checkpoint state."""

    def __init__(self, config=None):
        self.config = config if config is not None else self.default_config()
        self.config.validate()

    @classmethod
    def default_config(cls):
        raise NotImplementedError

    def initialize(
        self, agent: Agent, n_itr: int, seed: int = 0, replicas: Replicas | None = None
    ) -> None:
        self.agent = agent
        self.n_itr = n_itr
        # A recurrent agent learns from whole columns replayed from their stored states.
        self.recurrent = agent.initial_state(1) is not None
        self.flat, self.optimizer = flat_optimizer(
            agent.parameters(), self.config, gradient_sync(replicas)
        )
        self.normalizers = BatchNormalizers(self.config, replicas)

    def state_dict(self) -> dict:
        return {
            "optimizer": self.optimizer.state_dict(),
            "normalizers": self.normalizers.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.normalizers.load_state_dict(state.get("normalizers"))
