"""What every sampler promises: the ``Sampler`` protocol and the records it returns."""
from __future__ import annotations

from typing import Callable, NamedTuple, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
import torch

from rlfw.buffers import Samples, allocate, tree_map


class EpisodeInfo(NamedTuple):
    """One finished *game* episode (all lives, unclipped reward) of one env slot."""

    ret: float
    length: int
    slot: int


@runtime_checkable
class Sampler(Protocol):
    """Steps ``batch_B`` envs for ``batch_T`` steps per call into one ``[T, B]`` buffer.

    Lifecycle: construct with the env factory and sizes, ``initialize(agent)``, then
    ``obtain_samples(itr)`` repeatedly, ``evaluate(n)`` whenever, ``close()`` (also via
    ``with``). ``state_dict``/``load_state_dict`` capture everything needed for a resumed run
    to continue bitwise: env states, current observations and RNG streams.
    """

    batch_T: int
    batch_B: int

    def initialize(self, agent) -> Samples: ...

    def obtain_samples(self, itr: int) -> tuple[Samples, list[EpisodeInfo]]: ...

    def evaluate(self, n_episodes: int, greedy: bool = True) -> list[EpisodeInfo]: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...

    def close(self) -> None: ...


def check_positive(**sizes: int) -> None:
    """Raise ``ValueError`` for the first size that is not a positive int."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def allocate_samples(agent, obs_space: gym.Space, batch_T: int, batch_B: int,
                     shared: bool = False, debug: bool = False) -> Samples:
    """The ``[T, B]`` buffer for this agent and observation space, from one example step."""
    example_obs = np.zeros((1,) + obs_space.shape, obs_space.dtype)
    noise = np.zeros((1,) + agent.noise_shape, np.float32)
    step = agent.step(example_obs, noise)
    # The agent's info tree (AgentInfo for actor-critics, QInfo for DQN) sets the leaves.
    example = Samples(
        observation=torch.from_numpy(example_obs[0]),
        action=step.action[0],
        reward=torch.zeros((), dtype=torch.float32),
        terminated=torch.zeros((), dtype=torch.bool),
        truncated=torch.zeros((), dtype=torch.bool),
        agent_info=tree_map(lambda x: x[0], step.info),
        bootstrap_value=torch.zeros((), dtype=torch.float32),
    )
    return allocate(example, (batch_T, batch_B), shared=shared, debug_fill=debug)


class SamplerBase:
    """What all samplers share: sizes, evaluation on master-side eval envs, ``with``."""

    def __init__(self, env_factory: Callable[[bool], gym.Env], batch_T: int, batch_B: int,
                 seed: int = 0, n_eval_envs: int = 4, debug: bool = False):
        check_positive(batch_T=batch_T, batch_B=batch_B, n_eval_envs=n_eval_envs)
        self.env_factory = env_factory
        self.batch_T, self.batch_B = batch_T, batch_B
        self.seed = seed
        self.n_eval_envs = n_eval_envs
        self.debug = debug
        self.agent = None
        self.samples: Samples | None = None
        self._evaluator = None

    @property
    def evaluator(self):
        """Master-side evaluation envs, built on first use."""
        from rlfw.samplers.evaluation import Evaluator  # evaluation imports this module

        if self._evaluator is None:
            self._evaluator = Evaluator(self.env_factory, self.n_eval_envs, self.seed)
        return self._evaluator

    def evaluate(self, n_episodes: int, greedy: bool = True) -> list[EpisodeInfo]:
        if self.agent is None:
            raise RuntimeError(f"{type(self).__name__}.initialize(agent) must be called first")
        return self.evaluator.run(self.agent, n_episodes, greedy)

    def _eval_state(self) -> int:
        return self._evaluator.calls if self._evaluator else 0

    def _load_eval_state(self, calls: int) -> None:
        if calls:
            self.evaluator.calls = calls

    def _close_evaluator(self) -> None:
        if self._evaluator is not None:
            self._evaluator.close()
            self._evaluator = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def observation_space(self) -> gym.Space:
        """Read once from a throw-away env (workers build their own)."""
        probe = self.env_factory(True)
        try:
            return probe.observation_space
        finally:
            probe.close()

    def close(self) -> None:
        self._close_evaluator()
