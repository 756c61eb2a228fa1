"""What every algorithm offers a runner (``Algorithm``) and what a replay-based one adds
(``ReplayAlgorithm``); what PPO and A2C share is ``rlfw.algos.pg.base.PolicyGradient``.

Runners call only these methods. An algorithm learns either from the sampler's on-policy
``[T, B]`` batches (``optimize``) or, as a ``ReplayAlgorithm``, from a replay the batches are
appended to; the async runner appends from its sampler process and calls
``learn_from_replay`` itself.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, Protocol, cast

from rlfw.agents.base import Agent
from rlfw.algos.optim import Replicas
from rlfw.buffers import Samples
from rlfw.buffers.replay import ReplayBuffer


class AlgoConfig(Protocol):
    """What every algorithm's config (a dataclass of its own) offers."""

    def validate(self) -> None:
        """``ValueError`` naming the first bad setting."""


class ReplayConfig(AlgoConfig, Protocol):
    """What a replay algorithm's config offers besides."""

    @property
    def learning_starts(self) -> int:
        """Env steps collected before the first update."""


class Algorithm(ABC):
    """Turns sampled batches into gradient updates of an agent."""

    config: AlgoConfig  # each algorithm's own dataclass (subclasses declare which)

    @abstractmethod
    def initialize(
        self, agent: Agent, n_itr: int, seed: int = 0, replicas: Replicas | None = None
    ) -> None:
        """Bind to ``agent`` for a run of ``n_itr`` iterations; ``seed`` seeds the
        algorithm's own streams; ``replicas`` (multi-rank runs) average each gradient."""

    @abstractmethod
    def optimize(self, samples: Samples, itr: int) -> dict[str, float]:
        """Learn from batch ``itr``; returns statistics to log (``train/...``)."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to continue bitwise (optimizer, streams...)."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class ReplayAlgorithm(Algorithm):
    """An algorithm that learns from a replay its batches are appended to (DQN).

    ``optimize`` appends the batch and learns; the async runner instead has the sampler
    process append to a shared replay (``make_replay(..., shared=True)``) and calls
    ``learn_from_replay`` for each batch that arrived."""

    config: ReplayConfig
    replay: ReplayBuffer | None  # the replay, or None until ``make_replay``
    updates: int  # gradient steps taken so far

    @abstractmethod
    def make_replay(
        self, samples: Samples, shared: bool = False, seed: int | None = None, reserve_rows: int = 0
    ) -> ReplayBuffer:
        """Build the replay for batches shaped like ``samples`` (shared memory if
        ``shared``, with ``reserve_rows`` more rows than the capacity for a writer that
        runs ahead of what sampling sees)."""

    @abstractmethod
    def learn_from_replay(self, itr: int) -> dict[str, float]:
        """The gradient steps batch ``itr`` (already in the replay) pays for."""

    def optimize(self, samples: Samples, itr: int) -> dict[str, float]:
        """Append batch ``itr`` to the replay (made from the first batch), then learn."""
        if self.replay is None:
            self.make_replay(samples)
        cast(ReplayBuffer, self.replay).append_samples(samples)  # made just now if it was None
        return self.learn_from_replay(itr)

    def replay_ratio_since_start(self, itr: int, steps_per_itr: int) -> float:
        """Gradient steps per env step since learning started (``config.learning_starts``),
        over batches 0..itr."""
        first = max(math.ceil(self.config.learning_starts / steps_per_itr) - 1, 0)
        return self.updates / max((itr + 1 - first) * steps_per_itr, 1)

    def check_shared_replay(self) -> None:
        """``ValueError`` if this configuration cannot learn from a replay another process
        appends to (the async runner)."""
