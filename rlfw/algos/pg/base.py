"""The base PPO and A2C share (``rlfw.algos.base.Algorithm`` is the contract it fulfils)."""

from __future__ import annotations

from typing import Any, cast

from rlfw.agents.actor_critic import ActorCriticAgent
from rlfw.agents.base import Agent
from rlfw.algos.base import Algorithm
from rlfw.algos.optim import Replicas, flat_optimizer, gradient_sync
from rlfw.algos.pg.common import BatchNormalizers, PgConfig


class PolicyGradient(Algorithm):
    """What PPO and A2C share: the config check, the flat-parameter optimizer with the
    gradient average across replicas, per-batch reward/observation normalizers, and
    their checkpoint state."""

    config: PgConfig
    agent: ActorCriticAgent

    def __init__(self, config: PgConfig | None = None):
        self.config = config if config is not None else self.default_config()
        self.config.validate()

    @classmethod
    def default_config(cls) -> PgConfig:
        raise NotImplementedError

    def initialize(
        self, agent: Agent, n_itr: int, seed: int = 0, replicas: Replicas | None = None
    ) -> None:
        self.agent = cast(ActorCriticAgent, agent)  # what the PPO and A2C specs build
        self.n_itr = n_itr
        # A recurrent agent learns from whole columns replayed from their stored states.
        self.recurrent = agent.initial_state(1) is not None
        self.flat, self.optimizer = flat_optimizer(
            agent.parameters(), self.config, gradient_sync(replicas)
        )
        self.normalizers = BatchNormalizers(self.config, replicas)

    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "normalizers": self.normalizers.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.normalizers.load_state_dict(state.get("normalizers"))
