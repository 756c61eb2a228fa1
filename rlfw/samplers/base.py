"""What every sampler promises (the ``Sampler`` protocol runners are typed against) and the
lifecycle they share (``SamplerBase``: subclasses fill in ``_start``, ``_collect``,
``_state``, ``_load_state`` and ``_stop``; the base does the checks, the evaluation envs and
the closing)."""

from __future__ import annotations

import traceback
from typing import Any, Callable, Protocol, TypeVar, runtime_checkable

import gymnasium as gym
import numpy as np
import torch

from rlfw.agents.base import Agent
from rlfw.buffers import Samples, allocate, tree_map
from rlfw.buffers.tree import tree_paths
from rlfw.envs.masks import MASK_KEY
from rlfw.envs.multiagent import factory_columns
from rlfw.envs.spaces import observation_rows
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.samplers.machinery.evaluation import EvalLimits, EvaluationSeries
from rlfw.samplers.machinery.workers import DEFAULT_START_METHOD
from rlfw.utils.checks import NonFiniteError, check_positive

_SamplerBase = TypeVar("_SamplerBase", bound="SamplerBase")


@runtime_checkable
class Sampler(Protocol):
    """Steps ``batch_B`` envs for ``batch_T`` steps per call into one ``[T, B]`` buffer.

    Lifecycle: construct with the env factory and sizes, ``initialize(agent)``, then
    ``obtain_samples(itr)`` repeatedly, ``evaluate(n)`` whenever, ``close()`` (also via
    ``with``); a closed sampler may be initialized again. ``state_dict``/``load_state_dict``
    capture everything needed for a resumed run to continue bitwise: env states, current
    observations and RNG streams.
    """

    batch_T: int
    batch_B: int

    @property
    def initialized(self) -> bool: ...

    def initialize(self, agent: Agent) -> Samples: ...

    def obtain_samples(self, itr: int) -> tuple[Samples, list[EpisodeInfo]]: ...

    def evaluate(
        self, n_episodes: int, greedy: bool = True, limits: EvalLimits = EvalLimits()
    ) -> list[EpisodeInfo]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def allocate_samples(
    agent: Agent,
    obs_space: gym.Space[Any],
    batch_T: int,
    batch_B: int,
    shared: bool = False,
    debug: bool = False,
    valid: bool = False,
) -> Samples:
    """The ``[T, B]`` buffer for this agent and observation space, from one example step;
    ``valid``: with ``Samples.valid`` (an env of many agents)."""
    example_obs = observation_rows(obs_space, 1)
    if isinstance(example_obs, dict) and MASK_KEY in example_obs:
        example_obs[MASK_KEY][:] = 1  # a zero observation's mask would allow no action
    noise = np.zeros((1,) + tuple(agent.noise_shape), np.float32)
    state = agent.initial_state(1)
    step = agent.step(example_obs, noise, None, state)
    # The agent's info tree (AgentInfo for actor-critics, QInfo for DQN) sets the leaves.
    example = Samples(
        observation=tree_map(lambda x: torch.from_numpy(x)[0], example_obs),
        action=step.action[0],
        reward=torch.zeros((), dtype=torch.float32),
        terminated=torch.zeros((), dtype=torch.bool),
        truncated=torch.zeros((), dtype=torch.bool),
        agent_info=tree_map(lambda x: x[0], step.info),
        bootstrap_value=torch.zeros((), dtype=torch.float32),
        policy_version=torch.zeros((), dtype=torch.int64),
        agent_state=None if state is None else state[0].cpu(),
        final_observation=(
            tree_map(lambda x: torch.from_numpy(x)[0], example_obs)
            if getattr(agent, "keeps_final_observation", False)
            else None
        ),
        valid=torch.ones((), dtype=torch.bool) if valid else None,
    )
    samples: Samples = allocate(example, (batch_T, batch_B), shared=shared, debug_fill=debug)
    assert samples.policy_version is not None  # the example has one
    samples.policy_version.zero_()  # the runner's to stamp, not a sampler's to write
    return samples


def check_env_outputs(samples: Samples, itr: int, env_name: object) -> None:
    """``NonFiniteError`` naming the env, slot and step of the first NaN/inf reward or
    (float) observation in a batch: caught here, it never reaches a loss as a mystery."""
    fields = [("reward", samples.reward)]
    for path, leaf in tree_paths(samples.observation):
        if leaf.is_floating_point():
            fields.append((f"observation {path!r}" if path else "observation", leaf))
    for name, value in fields:
        bad = ~torch.isfinite(value.reshape(value.shape[0], value.shape[1], -1)).all(-1)
        if bad.any():
            t, b = (int(i) for i in torch.nonzero(bad)[0])
            raise NonFiniteError(
                f"env {env_name!r} slot {b} emitted a non-finite {name} at "
                f"step {t} of batch {itr}: {value[t, b].flatten()[:8].tolist()}"
            )


class SamplerBase:
    """Sizes, the initialize-first checks, evaluation on separate envs, state merging and
    closing, for every sampler kind. ``n_eval_workers > 0`` steps the evaluation envs in
    that many processes of their own (worth it for Atari; classic control is faster here),
    started by ``start_method`` (multiprocessing's; a kind's own workers start so too).
    ``sees_whole_rows``: the kind runs the policy on each step's full ``[B]`` row in one
    place, so it can show that row to an agent with per-step statistics."""

    sees_whole_rows = False

    def __init__(
        self,
        env_factory: Callable[[bool], gym.Env],
        batch_T: int,
        batch_B: int,
        seed: int = 0,
        n_eval_envs: int = 4,
        debug: bool = False,
        n_eval_workers: int = 0,
        start_method: str = DEFAULT_START_METHOD,
    ):
        check_positive(batch_T=batch_T, batch_B=batch_B, n_eval_envs=n_eval_envs)
        if (
            isinstance(n_eval_workers, bool)
            or not isinstance(n_eval_workers, int)
            or n_eval_workers < 0
        ):
            raise ValueError(f"n_eval_workers must be an integer >= 0, got {n_eval_workers!r}")
        self.n_eval_workers = n_eval_workers
        self.start_method = start_method
        self.env_factory = env_factory
        self.eval_env_factory = env_factory  # a kind may evaluate on a variant (native)
        self.env_width = factory_columns(env_factory)  # slots per env: its agents
        self.batch_T, self.batch_B = batch_T, batch_B
        self.seed = seed
        self.n_eval_envs = n_eval_envs
        self.debug = debug
        self.agent: Agent | None = None
        self.samples: Samples | None = None
        self._evaluations: EvaluationSeries | None = None
        self._running = False

    @classmethod
    def check_per_step_statistics(cls, name: str | None = None) -> None:
        """The rule, for this kind (registered as ``name``): per-step observation statistics
        need a policy that sees each step's whole ``[B]`` row (``sees_whole_rows``)."""
        if not cls.sees_whole_rows:
            who = cls.__name__ if name is None else f"sampler {name!r}"
            raise ValueError(
                f"{who} cannot update per-step observation statistics: its policy never sees "
                "a whole step's row of observations at once; use a sampler with batched "
                "inference over all envs (serial or gpu) or per-batch statistics "
                "(obs_norm_update='batch')"
            )

    # -- the lifecycle every sampler shares ---------------------------------------------
    def initialize(self, agent: Agent) -> Samples:
        """Start envs (and workers), allocate the ``[T, B]`` buffer; returns it."""
        if self._running:
            raise RuntimeError(
                f"{type(self).__name__} is already initialized; close() it "
                "before initializing it again"
            )
        if agent.per_step_statistics:
            self.check_per_step_statistics()
        self.agent = agent
        try:
            self.samples = self._start(agent)
        except BaseException as err:
            # The failed frames' locals hold named semaphores and shared memory; a kept
            # traceback must not keep them alive.
            traceback.clear_frames(err.__traceback__)
            self._stop()
            raise
        self._running = True
        return self.samples

    def obtain_samples(self, itr: int) -> tuple[Samples, list[EpisodeInfo]]:
        """Fill the buffer with the next ``batch_T`` steps of every slot."""
        self._check_running()
        samples, episodes = self._collect(itr)
        check_env_outputs(samples, itr, getattr(self.env_factory, "env_id", self.env_factory))
        return samples, episodes

    def evaluate(
        self, n_episodes: int, greedy: bool = True, limits: EvalLimits = EvalLimits()
    ) -> list[EpisodeInfo]:
        """Play ``n_episodes`` on separate evaluation envs (reseeded per call), within
        ``limits``; episodes cut by them come back with ``truncated=True``."""
        if self.agent is None:
            raise RuntimeError(f"{type(self).__name__}.initialize(agent) must be called first")
        return self.evaluations().run(self.agent, n_episodes, greedy, limits)

    def evaluations(self) -> EvaluationSeries:
        """This sampler's evaluation series (its envs are built on the first evaluation)."""
        if self._evaluations is None:
            self._evaluations = EvaluationSeries(
                self.eval_env_factory,
                self.n_eval_envs,
                self.seed,
                self.n_eval_workers,
                self.start_method,
            )
        return self._evaluations

    def state_dict(self) -> dict[str, Any]:
        self._check_running()
        return {"eval_calls": self.evaluations().calls, **self._state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._check_running()
        self._load_state(state)
        self.evaluations().calls = state["eval_calls"]

    def close(self) -> None:
        """Idempotent: stop workers and envs, free shared memory."""
        if self._running:
            self._running = False
            self._stop()
        if self._evaluations is not None:
            self._evaluations.close()

    def __getstate__(self) -> dict[str, Any]:
        # Shipped to another process (the async runner's sampler process), a sampler does
        # not take its evaluation envs along: evaluation stays with the learner.
        return {**vars(self), "_evaluations": None}

    @property
    def initialized(self) -> bool:
        """True between ``initialize`` and ``close``."""
        return self._running

    def __enter__(self: _SamplerBase) -> _SamplerBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_running(self) -> None:
        if not self._running:
            raise RuntimeError(
                f"{type(self).__name__}.initialize(agent) must be called first"
                + (" (it was closed)" if self.agent is not None else "")
            )

    def observation_space(self) -> gym.Space[Any]:
        """Read once from a throw-away env (workers build their own)."""
        probe = self.env_factory(True)
        try:
            return probe.observation_space
        finally:
            probe.close()

    # -- what each kind fills in --------------------------------------------------------
    def _start(self, agent: Agent) -> Samples:
        raise NotImplementedError

    def _collect(self, itr: int) -> tuple[Samples, list[EpisodeInfo]]:
        raise NotImplementedError

    def _state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _load_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError

    def _stop(self) -> None:
        """Free what ``_start`` made; also called after ``_start`` failed part-way."""
        raise NotImplementedError
