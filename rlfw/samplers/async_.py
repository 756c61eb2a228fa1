"""SamplerProcess: any sampler run free in a process of its own (the async runner's sampler,
as rlpyt's async samplers), started, watched and stopped by the same ``WorkerPool`` as
every other sampler process.

Batches pass in hand-offs of ``size`` batches (``Handoffs``): the process takes a credit
and loads weights once per hand-off (the learner returns the credit when it has learned the
hand-off's last batch, so the sampler is at most ``lead`` hand-offs ahead), the weights the
learner published after the hand-off ``lead`` before: a fixed policy lag, whatever the
timing. A hand-off of many small batches pays one handshake for all of them (SAC's preset
samples one step per batch; a handshake per step cost more than the overlap gained). A
batch goes either into a shared-memory replay (under the replay's lock, so a minibatch never
mixes a half-written batch in) or into one of ``lead x size`` shared on-policy ``[T, B]``
buffers in turn; a ``batch`` message reports it (with the replay rows written so far).
"""

from __future__ import annotations

import copy
import multiprocessing as mp
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol

import gymnasium as gym
import torch

from rlfw.agents.base import Agent
from rlfw.buffers import Samples, tree_index, tree_map
from rlfw.buffers.replay import Replay
from rlfw.samplers.base import SamplerBase, allocate_samples
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.samplers.machinery.evaluation import EvalLimits
from rlfw.samplers.machinery.workers import (
    CLOSED,
    DEFAULT_START_METHOD,
    JOIN_S,
    POLL_S,
    Handler,
    WorkerError,
    WorkerPool,
    master_gone,
    process_context,
    serve,
    share_memory,
    worker_setup,
)

if TYPE_CHECKING:
    from multiprocessing.synchronize import Lock, Semaphore

    from rlfw.samplers.machinery.workers import ProcessContext


class BatchReport(NamedTuple):
    """What the sampler process says about each batch it finished."""

    index: int  # type: ignore[assignment]  # the field shadows tuple.index, as meant
    policy_version: int  # weights it was sampled with (updates they had seen)
    episodes: list[EpisodeInfo]
    idle_s: float  # time the sampler waited for a credit before it
    rows_written: int  # replay rows appended up to and including this batch (or 0)


@dataclass(frozen=True)
class Handoffs:
    """Which batches pass together and which weights sample them: from batch ``first`` on,
    hand-offs of ``size`` batches; the sampler may be ``lead`` hand-offs ahead of the
    learner, so hand-off ``h`` is sampled with the weights published after hand-off
    ``h - lead`` (the first ``lead`` with the starting weights, version ``first``). A
    function of the configuration alone: the run's bits never depend on timing."""

    lead: int
    size: int = 1
    first: int = 0

    def index(self, itr: int) -> int:
        """The hand-off batch ``itr`` belongs to."""
        return (itr - self.first) // self.size

    def starts(self, itr: int) -> bool:
        """Batch ``itr`` opens a hand-off (the sampler takes a credit and loads weights)."""
        return (itr - self.first) % self.size == 0

    def ends(self, itr: int) -> bool:
        """Batch ``itr`` closes a hand-off (the learner publishes and returns a credit)."""
        return (itr + 1 - self.first) % self.size == 0

    def weights_due(self, itr: int) -> int:
        """The version (updates learned) of the weights that sample batch ``itr``."""
        return self.first + max(self.index(itr) - self.lead + 1, 0) * self.size

    def slot(self, version: int) -> int:
        """The shared-weights slot of ``version``, a hand-off boundary (``SharedWeights``)."""
        return ((version - self.first) // self.size) % self.lead


class ReplayWriter(Protocol):
    """What the sampler process appends batches through: a replay's ``writer``."""

    @property
    def rows_written(self) -> int: ...

    def append(self, samples: Samples) -> object: ...


def buffer_views(stacked: Samples, count: int) -> list[Samples]:
    """The ``count`` on-policy ``[T, B]`` buffers held in one stacked ``[count, T, B]``
    shared tree: passed to a process as one tree (a file descriptor per leaf, not per
    buffer and leaf), each buffer a view."""
    return [tree_index(stacked, i) for i in range(count)]


class SharedWeights:
    """The learner's last ``slots`` weight versions in shared memory, each in the slot its
    ``Handoffs`` gives: the sampler process loads exactly the version a batch is due, even
    when the learner has published a newer one meanwhile.

    Each weight is one shared tensor with a leading slot dimension, and a slot is a view of
    it: a process receives one file descriptor per weight however many slots there are
    (the forkserver start method sends at most 256 with a process's arguments)."""

    def __init__(self, agent: Agent, ctx: ProcessContext, slots: int):
        self.stacked = {
            k: share_memory(v.detach().cpu().unsqueeze(0).repeat(slots, *([1] * v.dim())))
            for k, v in agent.state_dict().items()
        }
        self.versions = share_memory(torch.full((slots,), -1, dtype=torch.int64))
        self.lock = ctx.Lock()

    @property
    def slots(self) -> list[dict[str, torch.Tensor]]:
        """Each slot's weights, as views of the stacked tensors."""
        count = len(self.versions)
        return [{k: v[i] for k, v in self.stacked.items()} for i in range(count)]

    def publish(self, agent: Agent, version: int, slot: int) -> None:
        with self.lock:
            for key, value in agent.state_dict().items():
                self.stacked[key][slot].copy_(value)
            self.versions[slot] = version

    def pull(
        self, agent: Agent, version: int, slot: int, have: int, alive: Callable[[], bool]
    ) -> int:
        """Load ``version`` from ``slot`` into ``agent`` (unless it holds it: ``have``),
        waiting until it is published; returns it, or -1 if ``alive()`` turned False
        meanwhile."""
        while True:
            with self.lock:
                if int(self.versions[slot]) == version:
                    if version != have:
                        agent.load_state_dict({k: v[slot] for k, v in self.stacked.items()})
                    return version
            if not alive():
                return -1
            time.sleep(0.001)


class FreeRunningLoop:
    """The sampler process's side of the async runner: answers ``state``/``load`` like any
    worker, and ``run`` (the first batch's index) samples batch after batch, each hand-off
    when its credit comes back and with the weights it is due, into the replay storage (DQN)
    or the on-policy buffers, answering the learner's commands between batches until
    ``close``."""

    def __init__(
        self,
        conn: Connection,
        sampler: SamplerBase,
        weights: SharedWeights,
        credits: Semaphore,
        handoffs: Handoffs,
        writer: ReplayWriter | None,
        replay_lock: Lock | None,
        buffers: Samples | None,
    ):
        self.conn, self.sampler, self.weights, self.credits = conn, sampler, weights, credits
        self.handoffs, self.writer, self.replay_lock = handoffs, writer, replay_lock
        self.buffers = (
            None if buffers is None else buffer_views(buffers, handoffs.lead * handoffs.size)
        )

    def handle(self, command: str, payload: Any) -> Any:
        if command == "state":
            return self.sampler.state_dict()
        if command == "load":
            return self.sampler.load_state_dict(payload)
        if command == "run":
            return self.run(payload)
        raise ValueError(f"unknown command {command!r}")

    def answer_waiting(self) -> bool:
        """Answer what the learner asked meanwhile; False: stop."""
        while self.conn.poll():
            command, payload = self.conn.recv()
            if command == "close":
                return False
            self.conn.send(("ok", self.handle(command, payload)))
        return True

    def run(self, itr: int) -> str:
        """Sample from batch ``itr`` on until told to close (or orphaned)."""
        assert self.sampler.agent is not None  # initialized before the process serves
        plan = replace(self.handoffs, first=itr)
        version = -1
        while True:
            idle = 0.0
            if plan.starts(itr):
                waited = self._wait_for_credit()
                if waited is None:
                    return CLOSED
                # The hand-off is due the weights after the one `lead` before: its credit
                # came back once the learner had published them, so the lag is fixed
                # whatever the timing (the first hand-offs use the start's weights).
                due = plan.weights_due(itr)
                version = self.weights.pull(
                    self.sampler.agent, due, plan.slot(due), version, self.answer_waiting
                )
                if version < 0:
                    return CLOSED
                idle = waited
            elif not self.answer_waiting():
                return CLOSED
            samples, episodes = self.sampler.obtain_samples(itr)
            rows = self._deliver(samples, itr, version)
            self.conn.send(("batch", BatchReport(itr, version, episodes, idle, rows)))
            itr += 1

    def _wait_for_credit(self) -> float | None:
        """Seconds spent waiting for the next batch's credit; None: stop."""
        waited = time.perf_counter()
        while not self.credits.acquire(timeout=POLL_S):
            if not self.answer_waiting() or master_gone():
                return None
        idle = time.perf_counter() - waited
        return idle if self.answer_waiting() else None

    def _deliver(self, samples: Samples, itr: int, version: int) -> int:
        """Batch ``itr`` into the replay storage (returns its rows written so far) or into
        its on-policy buffer, stamped with its weights' version (returns 0)."""
        if self.writer is not None:
            assert self.replay_lock is not None  # comes with the writer
            with self.replay_lock:
                self.writer.append(samples)
                return self.writer.rows_written
        assert self.buffers is not None  # on-policy: buffers instead of a writer
        dest = self.buffers[itr % len(self.buffers)]
        tree_map(lambda d, s: d.copy_(s), dest, samples)
        assert dest.policy_version is not None  # allocate_samples gives one
        dest.policy_version.fill_(version)
        return 0


def _sampler_main(
    conn: Connection,
    sampler: SamplerBase,
    agent: Agent,
    weights: SharedWeights,
    credits: Semaphore,
    handoffs: Handoffs,
    writer: ReplayWriter | None,
    replay_lock: Lock | None,
    buffers: Samples | None,
) -> None:
    """The sampler process (see ``FreeRunningLoop``); ``buffers``: the ``lead x size``
    on-policy buffers stacked (``buffer_views``)."""
    worker_setup(None)
    loop = FreeRunningLoop(conn, sampler, weights, credits, handoffs, writer, replay_lock, buffers)

    def make_handler() -> tuple[Handler, Callable[[], None]]:
        sampler.initialize(agent)
        return loop.handle, sampler.close

    serve(conn, make_handler)


class _WatchedLock:
    """The replay lock as the learner takes it: never blocks on a dead sampler process
    (killed while appending, it would hold the lock forever), and notices a dead one."""

    def __init__(self, lock: Lock, check_alive: Callable[[], None]):
        self.lock: Lock | None = lock
        self.check_alive = check_alive

    def __enter__(self) -> _WatchedLock:
        # Checked on every minibatch too (one waitpid, microseconds): a dead sampler then
        # stops the learner within one update, not after the whole batch's updates.
        try:
            self.check_alive()
            assert self.lock is not None  # dropped only after check_alive raised, as it does again
            while not self.lock.acquire(timeout=POLL_S):
                self.check_alive()
        except WorkerError:
            self.lock = None  # a kept traceback must not keep the named semaphore alive
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.lock is not None  # held since __enter__
        self.lock.release()


class SamplerProcess:
    """A sampler of any kind, run free in its own process; looks like a sampler to the
    runner (``initialize``, ``obtain_samples``, ``evaluate``, state, ``close``), plus
    ``begin`` (the weights it starts from) and ``learned`` (a batch learned: at the end of a
    hand-off, new weights and a credit back).

    ``replay`` (for replay-based algorithms) gives the shared-memory replay for batches
    shaped like its argument; the process appends to it. Without one, batches arrive in
    ``lead x handoff`` shared on-policy buffers in turn. ``lead`` bounds how many hand-offs
    of ``handoff`` batches the sampler may be ahead.
    """

    def __init__(
        self,
        sampler: SamplerBase,
        lead: int = 2,
        start_method: str = DEFAULT_START_METHOD,
        replay: Callable[[Samples], Replay] | None = None,
        handoff: int = 1,
    ):
        if lead < 1:
            raise ValueError(f"lead must be >= 1 hand-off, got {lead}")
        if handoff < 1:
            raise ValueError(f"handoff must be >= 1 batch, got {handoff}")
        self.handoffs = Handoffs(lead, handoff)
        self.sampler, self.lead, self.start_method = sampler, lead, start_method
        self.make_replay = replay
        self.batch_T, self.batch_B = sampler.batch_T, sampler.batch_B
        self.replay: Replay | None = None
        self.agent: Agent | None = None
        self.pool: WorkerPool | None = None
        self.samples: Samples | None = None
        self.reports: list[BatchReport] = []
        self.batches_done = 0  # finished by the sampler process (possibly not yet learned)
        self.last_report: BatchReport | None = None

    @property
    def initialized(self) -> bool:
        return self.pool is not None

    @property
    def seed(self) -> int:
        """The wrapped sampler's seed (a video's evaluation episode is seeded from it)."""
        return self.sampler.seed

    @property
    def eval_env_factory(self) -> Callable[[bool], gym.Env[Any, Any]]:
        """What the wrapped sampler evaluates on (videos replay an episode there)."""
        return self.sampler.eval_env_factory

    @property
    def uses_replay(self) -> bool:
        return self.make_replay is not None

    @property
    def proc(self) -> mp.process.BaseProcess | None:
        """The sampler process (None when not running)."""
        return None if self.pool is None or self.pool.closed else self.pool.procs[0]

    def initialize(self, agent: Agent) -> Samples:
        """Start the sampler process; it waits for the first ``obtain_samples``."""
        if self.pool is not None:
            raise RuntimeError("SamplerProcess is already initialized; close() it first")
        self.agent = agent
        ctx = process_context(self.start_method)
        example = allocate_samples(
            agent,
            self.sampler.observation_space(),
            self.batch_T,
            self.batch_B,
            valid=self.sampler.env_width > 1,
        )
        writer: ReplayWriter | None = None
        lock: Lock | None = None
        self.buffers: list[Samples] | None = None
        if self.uses_replay:
            assert self.make_replay is not None  # what uses_replay says
            self.replay = self.make_replay(example)
            # A new lock each start: a process killed while appending never releases its.
            lock = ctx.Lock()
            self.replay.lock = _WatchedLock(lock, self._check_alive)
            writer = self.replay.writer
        else:
            # one buffer per batch the sampler may hold ahead: batch k goes to buffer
            # k % count, whose previous batch (k - count) the learner released first
            # (one stacked tree: see ``buffer_views``)
            count = self.lead * self.handoffs.size
            stacked = tree_map(
                lambda x: x.unsqueeze(0).repeat(count, *([1] * x.dim())).share_memory_(),
                example,
            )
            self.buffers = buffer_views(stacked, count)
            example = self.buffers[0]
        self.samples = example
        self.weights: SharedWeights | None = SharedWeights(agent, ctx, self.lead)
        self.credits: Semaphore | None = ctx.Semaphore(self.lead)
        self.reports, self.batches_done, self.started = [], 0, False
        try:
            # Not a daemon: the process starts its own sampler's workers, and it closes
            # them before it exits (hence the longer grace).
            # The process gets a copy: handing it the learner's agent would put the
            # learner's parameters in shared memory, and each weight load in the process
            # would then overwrite the learner's weights mid-update.
            self.pool = WorkerPool(
                _sampler_main,
                [
                    (
                        self.sampler,
                        copy.deepcopy(agent),
                        self.weights,
                        self.credits,
                        self.handoffs,
                        writer,
                        lock,
                        None if self.buffers is None else stacked,
                    )
                ],
                self.start_method,
                label=lambda i: "sampler process",
                daemon=False,
                grace_s=JOIN_S + 2,
            )
        except BaseException:
            self.close()
            raise
        return example

    # -- talking to the process ----------------------------------------------------------
    def _receive(self, kind: str) -> Any:
        """Block (checking the process is alive) for a message of ``kind``; batch reports
        that arrive meanwhile are queued."""
        while True:
            got, payload = self._pool().receive_message(0)
            if got == "batch":
                self.reports.append(payload)
                self.batches_done += 1
            if got == kind:
                return payload

    def _pool(self) -> WorkerPool:
        if self.pool is None or self.pool.closed:
            raise WorkerError(
                "the sampler process was stopped (after a failure or close()); initialize it again"
            )
        return self.pool

    def _check_alive(self) -> None:
        self._pool().check_alive()

    # -- the sampler interface -------------------------------------------------------------
    def obtain_samples(self, itr: int) -> tuple[Samples | None, list[EpisodeInfo]]:
        """The next finished batch (waiting for it if none is): its buffer (``None`` with a
        replay: the batch is in the replay already) and episodes."""
        if not self.started:
            self._pool().send_one(0, "run", itr)
            self.started = True
        while not self.reports:
            self._receive("batch")
        report = self.reports.pop(0)
        self.last_report = report
        if self.replay is not None:  # minibatches see this batch and none after it
            self.replay.reveal(report.rows_written)
        samples = None if self.buffers is None else self.buffers[report.index % len(self.buffers)]
        return samples, report.episodes

    def begin(self, agent: Agent, itr: int) -> None:
        """The process's first batch is ``itr``, sampled (as the next ``lead`` hand-offs)
        with ``agent``'s weights: at the start, a resume or a restart."""
        assert self.weights is not None  # initialized, not closed
        self.handoffs = replace(self.handoffs, first=itr)
        self.weights.publish(agent, itr, self.handoffs.slot(itr))

    def learned(self, agent: Agent, itr: int) -> None:
        """The learner is done with batch ``itr``: at a hand-off's end, ``agent``'s weights
        go out as version ``itr + 1`` and the sampler may start another hand-off."""
        assert self.weights is not None and self.credits is not None  # initialized
        if self.handoffs.ends(itr):
            self.weights.publish(agent, itr + 1, self.handoffs.slot(itr + 1))
            self.credits.release()

    def evaluate(
        self, n_episodes: int, greedy: bool = True, limits: EvalLimits = EvalLimits()
    ) -> list[EpisodeInfo]:
        """Evaluation episodes with the learner's agent, in this process (as samplers do)."""
        assert self.agent is not None, "initialize(agent) first"
        return self.sampler.evaluations().run(self.agent, n_episodes, greedy, limits)

    def state_dict(self) -> dict[str, Any]:
        self._pool().send_one(0, "state")
        return {"eval_calls": self.sampler.evaluations().calls, "sampler": self._receive("ok")}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._pool().send_one(0, "load", state["sampler"])
        self._receive("ok")
        self.sampler.evaluations().calls = state["eval_calls"]

    def close(self) -> None:
        """Idempotent: stop the process (killed if it does not stop within seconds)."""
        if self.pool is not None:
            pool, self.pool = self.pool, None
            pool.close()
        # Named semaphores live in /dev/shm until their last reference is gone.
        self.credits = self.weights = None
        if self.replay is not None:
            self.replay.lock = nullcontext()
        self.sampler.close()  # never initialized here: closes only its evaluation envs

    def __enter__(self) -> SamplerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
