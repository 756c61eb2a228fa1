"""ConcurrentRunner (HTS-RL): batch k+1 is sampled while update k+1 is learned from batch k,
with the policy lag fixed at exactly one update and the run bitwise deterministic."""

from __future__ import annotations

import copy
import threading
from typing import Any, Callable, Generic, Protocol, TypeVar, cast

import torch

from rlfw.agents.base import Agent
from rlfw.algos.base import Algorithm
from rlfw.buffers import Samples, tree_map
from rlfw.runners.base import Runner, policy_versions
from rlfw.runners.schedule import RunSchedule
from rlfw.samplers.base import Sampler
from rlfw.samplers.episodes import EpisodeInfo

T = TypeVar("T")
Batch = tuple[Samples, list[EpisodeInfo]]


class _HoldsBuffer(Protocol):
    """A sampler that keeps its ``[T, B]`` buffer, once initialized, as ``samples`` (every
    ``SamplerBase``; the ``Sampler`` protocol does not promise it)."""

    samples: Samples | None


class _Background(Generic[T]):
    """One sampling call in a thread; ``result()`` joins it and re-raises what it raised
    (a ``WorkerError``, or a ``KeyboardInterrupt`` delivered there) in the caller."""

    def __init__(self, fn: Callable[..., T], *args: Any) -> None:
        self._out: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(fn, *args), daemon=True, name="rlfw-concurrent-sampler"
        )
        self._thread.start()

    def _run(self, fn: Callable[..., T], *args: Any) -> None:
        try:
            self._out = fn(*args)
        except BaseException as err:  # handed to the main thread, which decides
            self._error = err

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return cast(T, self._out)  # set: fn returned


class ConcurrentRunner(Runner):
    """HTS-RL's schedule for every algorithm, over any sampler.

    The sampler steps a copy of the agent (the *behaviour* agent) in a background thread
    while the learner updates the agent in the main thread; each side has its own ``[T, B]``
    buffer, and the two learner buffers are used in turn. Timeline, with θ_k the weights
    after k updates::

        sample batch 0 with θ_0
        iteration k:  sample batch k+1 with θ_k  ||  learn θ_{k+1} from batch k

    so batch k (k >= 1) is always drawn with θ_{k-1}: the lag is exactly one update, and
    which weights sample which batch depends on the iteration only, never on timing. Same
    seed and configuration ⇒ bitwise-identical runs; checkpoints hold the batch in hand so
    a resumed run equals an uninterrupted one. PPO's importance ratio corrects for the lag;
    A2C ignores it (its gradient is one update stale, as in HTS-RL's A2C). A replay
    algorithm (DQN, C51, R2D1) appends batch k to its replay in the learner, then learns:
    its behaviour policy (ε-greedy over θ_{k-1}) is one update behind, which Q-learning, off
    policy, does not need corrected.

    Sampling in a thread overlaps well when the sampler's work is outside the GIL (worker
    processes of the cpu/gpu/alternating samplers, ALE's native threads); the serial sampler
    on Python-heavy envs overlaps little.
    """

    samples_with_learner_agent = False

    def __init__(
        self,
        algo: Algorithm,
        agent: Agent,
        sampler: Sampler,
        schedule: RunSchedule,
        **kwargs: Any,
    ):
        super().__init__(algo, agent, sampler, schedule, **kwargs)
        if sampler.initialized:
            raise ValueError(
                "ConcurrentRunner initializes the sampler with its own copy of "
                "the agent; pass a sampler that is not initialized yet"
            )
        self.behaviour = copy.deepcopy(agent)
        self._inflight: _Background[Batch] | None = None
        self.pending: Samples | None = None  # the batch the next update learns from
        self._saved_pending: Samples | None = None

    def _sampling_agent(self) -> Agent:
        return self.behaviour

    def _on_startup(self) -> None:
        example = cast(_HoldsBuffer, self.sampler).samples
        self.buffers: list[Samples] = [tree_map(torch.zeros_like, example) for _ in range(2)]
        self._load_pending(self.start_itr)

    def _sample_into(self, itr: int, version: int) -> Batch:
        """Sample batch ``itr`` with the behaviour agent (weights after ``version`` updates)
        into learner buffer ``itr % 2``."""
        samples, episodes = self.sampler.obtain_samples(itr)
        dest = self.buffers[itr % 2]
        tree_map(lambda d, s: d.copy_(s), dest, samples)
        policy_versions(dest).fill_(version)
        return dest, episodes

    def _iteration(self, itr: int) -> bool:
        if self.pending is None:  # the run's first batch: nothing to overlap it with yet
            with self.reporter.timing.add_time("sample"):
                self.pending, episodes = self._sample_into(itr, itr)
            self.reporter.episodes += episodes
        if itr + 1 < self.n_itr:
            self._inflight = _Background(self._sample_into, itr + 1, itr)
        try:
            self._learn(self.pending, itr)
            self._record_policy_lag(self.pending, itr)
        except BaseException:
            self._settle()
            raise
        incoming = self._join()
        if incoming is not None:
            self.pending, episodes = incoming
            self.reporter.episodes += episodes
        else:
            self.pending = None
        self.behaviour.load_state_dict(self.agent.state_dict())  # θ_{itr+1}: next batch's
        return self._after_update(itr)

    def _join(self) -> Batch | None:
        if self._inflight is None:
            return None
        inflight, self._inflight = self._inflight, None
        with self.reporter.timing.add_time("wait_for_sampler"):
            return inflight.result()

    def _settle(self) -> None:
        """Wait for the in-flight batch: a sampler must not be closed while a thread uses
        it, and when the run is failing already, that failure is the one to report."""
        try:
            self._join()
        except BaseException:
            pass

    def _on_restart(self, itr: int) -> None:
        self._load_pending(itr)

    # -- checkpoints: the batch in hand travels with them ---------------------------------
    def _extra_state(self) -> dict[str, Any]:
        if self.pending is None:
            return {"pending": None}
        return {"pending": tree_map(torch.clone, self.pending)}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._saved_pending = state.get("pending")

    def _load_pending(self, itr: int) -> None:
        """After a checkpoint was loaded (or none): batch ``itr`` back in hand, and the
        behaviour agent on the learner's weights."""
        saved, self._saved_pending = self._saved_pending, None
        self.behaviour.load_state_dict(self.agent.state_dict())
        self.pending = None
        if saved is not None:
            dest = self.buffers[itr % 2]
            tree_map(lambda d, s: d.copy_(s), dest, saved)
            self.pending = dest
