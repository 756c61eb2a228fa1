"""AsyncRunner (as rlpyt's AsyncRl): the sampler runs free in a process of its own while the
learner optimizes in the main process; the lead of either side is bounded.

DQN: the sampler process appends each batch to a shared-memory replay (under the replay's
lock, so a minibatch never mixes a half-written batch in) and the learner does exactly the
configured ``replay_ratio x T x B`` updates per batch; PPO/A2C: the sampler fills two shared
``[T, B]`` buffers in turn and the learner takes each batch as it completes. Either way the
sampler may run at most ``lead`` batches ahead of what the learner has consumed (it waits
for a credit), and the learner waits when no batch is ready, so the replay ratio holds in
both directions. Policy lag, achieved replay ratio and both sides' idle time are logged.
Timing decides which weights sample which batch: async runs are not bitwise reproducible
(the one documented exception), and a resumed run continues rather than repeats.
"""
from __future__ import annotations

import math
import os
import time
import traceback
from contextlib import nullcontext
from typing import Any, NamedTuple

import torch
import torch.multiprocessing as tmp

from rlfw.buffers import Samples, tree_map
from rlfw.runners.sync import SyncRunner
from rlfw.samplers.base import allocate_samples
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.samplers.evaluation import EvalLimits
from rlfw.samplers.workers import JOIN_S, POLL_S, WorkerError, describe_exit, worker_setup


class BatchReport(NamedTuple):
    """What the sampler process says about each batch it finished."""

    index: int
    policy_version: int     # weights it was sampled with (updates they had seen)
    episodes: list
    idle_s: float           # time the sampler waited for a credit before it


class SharedWeights:
    """The learner's newest weights in shared memory, with their version; the sampler
    process copies them in at the start of each batch when the version moved on."""

    def __init__(self, agent, ctx):
        self.tensors = {k: v.detach().cpu().clone().share_memory_()
                        for k, v in agent.state_dict().items()}
        self.version = torch.zeros((), dtype=torch.int64).share_memory_()
        self.lock = ctx.Lock()

    def publish(self, agent, version: int) -> None:
        with self.lock:
            for key, value in agent.state_dict().items():
                self.tensors[key].copy_(value)
            self.version.fill_(version)

    def pull(self, agent, have: int) -> int:
        """Load the newest weights into ``agent`` if newer than ``have``; their version."""
        with self.lock:
            version = int(self.version)
            if version != have:
                agent.load_state_dict(self.tensors)
        return version


def _answer(conn, sampler, command: str, payload) -> bool:
    """Carry out one command from the learner; False: stop."""
    if command == "stop":
        return False
    if command == "state":
        conn.send(("state", sampler.state_dict()))
    elif command == "load":
        sampler.load_state_dict(payload)
        conn.send(("loaded", None))
    return True


def _handle_commands(conn, sampler) -> bool:
    """Answer what the learner asked while this process was busy; False: stop."""
    while conn.poll():
        if not _answer(conn, sampler, *conn.recv()):
            return False
    return True


def _sampler_main(conn, sampler, agent, weights: SharedWeights, credits, storage, replay_lock,
                  buffers, parent_pid: int) -> None:
    """The sampler process: initialize, wait for 'start', then sample batch after batch,
    each after taking a credit, into the replay or the on-policy buffer in turn."""
    worker_setup(None)
    try:
        sampler.initialize(agent)
        conn.send(("ready", None))
        itr = None
        while itr is None:  # a checkpoint may be loaded or written before the start
            command, payload = conn.recv()
            if command == "start":
                itr = payload
            elif not _answer(conn, sampler, command, payload):
                return
        version = -1
        while True:
            waited = time.perf_counter()
            while not credits.acquire(timeout=POLL_S):
                if not _handle_commands(conn, sampler) or os.getppid() != parent_pid:
                    return
            idle = time.perf_counter() - waited
            if not _handle_commands(conn, sampler):
                return
            version = weights.pull(sampler.agent, version)
            samples, episodes = sampler.obtain_samples(itr)
            if storage is not None:
                with replay_lock:
                    storage.append(samples)
            else:
                dest = buffers[itr % 2]
                tree_map(lambda d, s: d.copy_(s), dest, samples)
                dest.policy_version.fill_(version)
            conn.send(("batch", BatchReport(itr, version, episodes, idle)))
            itr += 1
    except (BrokenPipeError, EOFError):
        return  # the learner is gone; nothing to report to
    except BaseException:
        try:
            conn.send(("error", f"sampler process (pid {os.getpid()}) raised an exception:\n"
                                f"{traceback.format_exc()}"))
        except OSError:
            pass
    finally:
        sampler.close()


class _WatchedLock:
    """The replay lock as the learner takes it: never blocks on a dead sampler process
    (killed while appending, it would hold the lock forever), and notices a dead one."""

    def __init__(self, lock, check_alive):
        self.lock, self.check_alive = lock, check_alive

    def __enter__(self):
        # Checked on every minibatch too (one waitpid, microseconds): a dead sampler then
        # stops the learner within one update, not after the whole batch's updates.
        try:
            self.check_alive()
            while not self.lock.acquire(timeout=POLL_S):
                self.check_alive()
        except WorkerError:
            self.lock = None  # a kept traceback must not keep the named semaphore alive
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.lock.release()


class SamplerProcess:
    """A sampler of any kind, run free in its own process; looks like a sampler to the
    runner (``initialize``, ``obtain_samples``, ``evaluate``, state, ``close``), plus
    ``publish`` (new weights) and ``release`` (one batch consumed: a credit back).

    ``algo`` with a replay (DQN) gets a shared-memory replay the process appends to; other
    algorithms read the two shared on-policy buffers. ``lead`` bounds how many batches the
    sampler may be ahead of the learner.
    """

    def __init__(self, sampler, algo, lead: int = 2, start_method: str = "spawn"):
        if lead < 1:
            raise ValueError(f"lead must be >= 1 batch, got {lead}")
        self.sampler, self.algo, self.lead = sampler, algo, lead
        self.batch_T, self.batch_B = sampler.batch_T, sampler.batch_B
        self.ctx = tmp.get_context(start_method)
        self.agent = None
        self.proc = None
        self.conn = None
        self.samples: Samples | None = None
        self.reports: list[BatchReport] = []
        self.batches_done = 0  # finished by the sampler process (possibly not yet learned)
        self.last_report: BatchReport | None = None

    @property
    def initialized(self) -> bool:
        return self.proc is not None

    @property
    def uses_replay(self) -> bool:
        return hasattr(self.algo, "learn_from_replay")

    def initialize(self, agent) -> Samples:
        """Start the sampler process (it waits for the first ``obtain_samples``)."""
        if self.proc is not None:
            raise RuntimeError("SamplerProcess is already initialized; close() it first")
        self.agent = agent
        example = allocate_samples(agent, self.sampler.observation_space(), self.batch_T,
                                   self.batch_B, shared=not self.uses_replay)
        storage = lock = None
        self.buffers = None
        if self.uses_replay:
            if self.algo.replay is None:
                self.algo.make_replay(example, shared=True, seed=self.sampler.seed)
            # A new lock each start: a process killed while appending never releases its.
            lock = self.ctx.Lock()
            self.algo.replay.lock = _WatchedLock(lock, self._check_alive)
            storage = self.algo.replay.storage
        else:
            self.buffers = [example, tree_map(lambda x: x.clone().share_memory_(), example)]
        self.samples = example
        self.weights = SharedWeights(agent, self.ctx)
        self.credits = self.ctx.Semaphore(self.lead)
        self.reports, self.batches_done, self.started = [], 0, False
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(
            target=_sampler_main, name="rlfw-async-sampler",
            args=(child, self.sampler, agent, self.weights, self.credits, storage, lock,
                  self.buffers, os.getpid()))
        self.proc.start()
        child.close()
        self.conn = parent
        try:
            self._receive("ready")
        except BaseException:
            self.close()
            raise
        return example

    # -- talking to the process ----------------------------------------------------------
    def _receive(self, kind: str) -> Any:
        """Block (checking the process is alive) for a message of ``kind``; batch reports
        that arrive meanwhile are queued."""
        while True:
            while not self.conn.poll(POLL_S):
                if self.proc.exitcode is not None:
                    self._raise_dead()
            try:
                got, payload = self.conn.recv()
            except (EOFError, OSError):
                self._raise_dead()
            if got == "error":
                self.close()
                raise WorkerError(payload)
            if got == "batch":
                self.reports.append(payload)
                self.batches_done += 1
            if got == kind:
                return payload

    def _check_alive(self) -> None:
        if self.proc is None or self.proc.exitcode is not None:
            self._raise_dead()

    def _raise_dead(self) -> None:
        if self.proc is None:
            raise WorkerError("the sampler process was stopped (after a failure or close())")
        self.proc.join(timeout=1.0)
        report = None
        try:
            while self.conn.poll():
                got, payload = self.conn.recv()
                if got == "error":
                    report = payload
        except (EOFError, OSError):
            pass
        code, pid = self.proc.exitcode, self.proc.pid
        self.close()
        if report is not None:
            raise WorkerError(report)
        raise WorkerError(f"sampler process (pid {pid}) died: {describe_exit(code)}")

    def _send(self, command: str, payload: Any = None) -> None:
        if self.proc is None:
            raise WorkerError("the sampler process was stopped (after a failure or close()); "
                              "initialize it again")
        try:
            self.conn.send((command, payload))
        except (OSError, ValueError):
            self._raise_dead()

    # -- the sampler interface -------------------------------------------------------------
    def obtain_samples(self, itr: int) -> tuple[Samples | None, list[EpisodeInfo]]:
        """The next finished batch (waiting for it if none is): its buffer (``None`` for
        replay-based algorithms: the batch is in the replay already) and episodes."""
        if not self.started:
            self._send("start", itr)
            self.started = True
        while not self.reports:
            self._receive("batch")
        report = self.reports.pop(0)
        self.last_report = report
        samples = None if self.uses_replay else self.buffers[report.index % 2]
        return samples, report.episodes

    def publish(self, agent, version: int) -> None:
        self.weights.publish(agent, version)

    def release(self) -> None:
        """The learner is done with the oldest batch: the sampler may start another."""
        self.credits.release()

    def evaluate(self, n_episodes: int, greedy: bool = True,
                 limits: EvalLimits = EvalLimits()) -> list[EpisodeInfo]:
        """Evaluation episodes with the learner's agent, in this process (as samplers do)."""
        return self.sampler.evaluations().run(self.agent, n_episodes, greedy, limits)

    def state_dict(self) -> dict:
        self._send("state")
        return {"eval_calls": self.sampler.evaluations().calls,
                "sampler": self._receive("state")}

    def load_state_dict(self, state: dict) -> None:
        self._send("load", state["sampler"])
        self._receive("loaded")
        self.sampler.evaluations().calls = state["eval_calls"]

    def close(self) -> None:
        """Idempotent: stop the process (killed if it does not stop within seconds)."""
        if self.proc is not None:
            proc, conn, self.proc = self.proc, self.conn, None
            if proc.is_alive():
                try:
                    conn.send(("stop", None))
                except (OSError, ValueError):
                    pass
            proc.join(timeout=JOIN_S + 2)  # it closes its own sampler's workers first
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=JOIN_S)
            conn.close()
            # Named semaphores live in /dev/shm until their last reference is gone.
            self.credits = self.weights = None
            if self.uses_replay and self.algo.replay is not None:
                self.algo.replay.lock = nullcontext()
        self.sampler.close()  # never initialized here: closes only its evaluation envs

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncRunner(SyncRunner):
    """Sampler and learner free-running in separate processes (see the module docstring).

    Works with every sampler kind (the sampler and its workers live in the sampler
    process) and with PPO, A2C and DQN. Checkpoints, evaluation, restarts and Ctrl-C are
    the sync runner's; a dead sampler process is a ``WorkerError`` within ``POLL_S``."""

    def __init__(self, algo, agent, sampler, schedule, lead: int = 2,
                 start_method: str = "spawn", **kwargs):
        config = getattr(algo, "config", None)
        if getattr(config, "prioritized", False):
            raise ValueError("runner 'async' with prioritized replay is not supported: its "
                             "priorities cannot follow rows another process writes; use "
                             "uniform replay with runner 'async', or runner 'sync'")
        super().__init__(algo, agent, SamplerProcess(sampler, algo, lead, start_method),
                         schedule, **kwargs)
        self.idle = {"learner": 0.0, "sampler": 0.0}

    def _iteration(self, itr: int) -> bool:
        waited = time.perf_counter()
        samples, episodes = self.sampler.obtain_samples(itr)
        self.idle["learner"] += time.perf_counter() - waited
        report = self.sampler.last_report
        self.idle["sampler"] += report.idle_s
        self.episodes += episodes
        self._learn(samples, itr)
        self.sampler.publish(self.agent, itr + 1)
        self.sampler.release()
        self._record_async(itr, report)
        return self._after_update(itr)

    def _update(self, samples, itr: int) -> dict[str, float]:
        if self.sampler.uses_replay:  # the sampler process appended the batch already
            return self.algo.learn_from_replay(itr)
        return self.algo.optimize(samples, itr)

    def _record_async(self, itr: int, report: BatchReport) -> None:
        log = self.logger.record
        log("async/policy_lag", float(itr - report.policy_version))
        log("async/learner_idle_s", self.idle["learner"])
        log("async/sampler_idle_s", self.idle["sampler"])
        log("async/batches_ahead", float(self.sampler.batches_done - (itr + 1)))
        if self.sampler.uses_replay:
            log("async/replay_ratio", self.achieved_replay_ratio(itr))

    def achieved_replay_ratio(self, itr: int) -> float:
        """Gradient updates per env step since learning started, over batches 0..itr."""
        first = max(math.ceil(self.algo.config.learning_starts / self.local_per_itr) - 1, 0)
        return self.algo.updates / max((itr + 1 - first) * self.local_per_itr, 1)

    def _startup(self) -> None:
        self.idle = {"learner": 0.0, "sampler": 0.0}
        super()._startup()
        self.sampler.publish(self.agent, self.start_itr)  # the process starts on these

    def _restart_after(self, err: WorkerError) -> int:
        itr = super()._restart_after(err)
        self.sampler.publish(self.agent, itr)  # the checkpoint's weights, not the pre-restart
        return itr
