"""AsyncRunner (as rlpyt's AsyncRl): the sampler runs free in a process of its own
(``rlfw.samplers.async_.SamplerProcess``) while the learner optimizes in the main process;
the lead of either side is bounded.

A replay algorithm (DQN): the sampler process appends each batch to a shared-memory replay
and the learner does exactly the configured ``replay_ratio x T x B`` updates per batch;
PPO/A2C: the sampler fills ``lead`` shared ``[T, B]`` buffers in turn and the learner takes each
batch as it completes. Either way the sampler may run at most ``lead`` batches ahead of what
the learner has consumed (it waits for a credit), and the learner waits when no batch is
ready, so the replay ratio holds in both directions. Batches pass in hand-offs of
``handoff`` batches (one credit and one weight load each; by default one batch, and for a
replay learner as many as make ``HANDOFF_STEPS`` env steps: SAC's one-step batches would
otherwise pay a handshake per step), and the lead counts hand-offs. Policy lag, achieved
replay ratio and both sides' idle time are logged. Timing decides nothing the run
computes: hand-off ``h`` is sampled with the weights published after hand-off ``h - lead``
(with single-batch hand-offs, a policy lag of ``lead - 1`` updates), and the learner's
minibatches for batch ``k`` draw only from the batches up to ``k`` (the sampler writes
ahead into rows the learner does not see yet). Runs repeat
bitwise whatever the timing: the learner held back or the machine kept busy by another
process (tested at 16 batches; 100k DQN steps in ``experiments/async_under_load.py``).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, cast

from rlfw.agents.base import Agent
from rlfw.algos.base import Algorithm, ReplayAlgorithm
from rlfw.buffers import Samples
from rlfw.buffers.replay import Replay
from rlfw.runners.base import Runner
from rlfw.runners.schedule import RunSchedule
from rlfw.samplers.async_ import BatchReport, SamplerProcess
from rlfw.samplers.base import Sampler, SamplerBase
from rlfw.samplers.machinery.workers import DEFAULT_START_METHOD

# A replay learner's hand-off carries at least this many env steps by default: one
# handshake (a credit, a weight load, a message each way: about 1.5 ms on 2 cores) then
# costs under 2% of a one-update-per-step learner's time (SAC: ~8 ms an update).
HANDOFF_STEPS = 64


def handoff_batches(handoff: int | None, algo: Algorithm, steps_per_batch: int) -> int:
    """Batches per hand-off: ``handoff`` when set; else one for an on-policy learner (its
    lag is the lead's, as the lag study measures it) and, for a replay learner, the
    fewest batches that make ``HANDOFF_STEPS`` env steps."""
    if handoff is not None:
        return handoff
    if not isinstance(algo, ReplayAlgorithm):
        return 1
    return max(1, math.ceil(HANDOFF_STEPS / steps_per_batch))


class AsyncRunner(Runner):
    """Sampler and learner free-running in separate processes (see the module docstring).

    Works with every sampler kind (the sampler and its workers live in the sampler
    process) and with every registered algorithm (a replay learner shares its replay with
    the sampler process). Checkpoints, evaluation, restarts and Ctrl-C are
    the skeleton's; a dead sampler process is a ``WorkerError`` within ``POLL_S``."""

    samples_with_learner_agent = False
    shares_replay = True  # a replay algorithm learns from what the sampler process appends
    config_fields = {
        "lead": "async_lead",
        "handoff": "async_handoff",
        "start_method": "start_method",
    }

    def __init__(
        self,
        algo: Algorithm,
        agent: Agent,
        sampler: SamplerBase,
        schedule: RunSchedule,
        lead: int = 2,
        start_method: str = DEFAULT_START_METHOD,
        handoff: int | None = None,
        **kwargs: Any,
    ):
        size = handoff_batches(handoff, algo, sampler.batch_T * sampler.batch_B)
        replay = None
        if isinstance(algo, ReplayAlgorithm):
            algo.check_shared_replay()
            replay = self._shared_replay(algo, sampler.seed, lead * size * sampler.batch_T)
        process = SamplerProcess(sampler, lead, start_method, replay, handoff=size)
        # a sampler to the skeleton, though its batches are None with a replay
        super().__init__(algo, agent, cast(Sampler, process), schedule, **kwargs)
        self.idle = {"learner": 0.0, "sampler": 0.0}

    @property
    def _process(self) -> SamplerProcess:
        """``self.sampler``, as the ``SamplerProcess`` this runner made it."""
        return cast(SamplerProcess, self.sampler)

    @staticmethod
    def _shared_replay(
        algo: ReplayAlgorithm, seed: int, reserve_rows: int
    ) -> Callable[[Samples], Replay]:
        """The replay the sampler process appends to (up to ``lead`` hand-offs beyond what
        the learner sees): made once, kept across restarts."""

        def make(example: Samples) -> Replay:
            if algo.replay is None:
                algo.make_replay(example, shared=True, seed=seed, reserve_rows=reserve_rows)
            # made just now if it was None; R2D1's is a SequenceReplay, which SamplerProcess
            # drives as it does a Replay (its annotation names Replay alone)
            return cast(Replay, algo.replay)

        return make

    def _iteration(self, itr: int) -> bool:
        waited = time.perf_counter()
        samples, episodes = self._process.obtain_samples(itr)
        self.idle["learner"] += time.perf_counter() - waited
        report = cast(BatchReport, self._process.last_report)  # the batch's, just received
        self.idle["sampler"] += report.idle_s
        self.reporter.episodes += episodes
        self._learn(cast(Samples, samples), itr)  # None with a replay, unread by _update
        self._process.learned(self.agent, itr)
        self._record_async(itr, report)
        return self._after_update(itr)

    def _update(self, samples: Samples, itr: int) -> dict[str, float]:
        if self._process.uses_replay:  # the sampler process appended the batch already
            return self._replay_algo.learn_from_replay(itr)
        return self.algo.optimize(samples, itr)

    @property
    def _replay_algo(self) -> ReplayAlgorithm:
        """``self.algo`` where the sampler process appends to a replay: only a
        ``ReplayAlgorithm`` gets one (``__init__``)."""
        return cast(ReplayAlgorithm, self.algo)

    def _record_async(self, itr: int, report: BatchReport) -> None:
        log = self.reporter.logger.record
        # one name for every runner; the report's version is the whole batch's (DQN's batch
        # went straight into the replay, so only the report has it)
        log("train/policy_lag", float(itr - report.policy_version))
        log("async/learner_idle_s", self.idle["learner"])
        log("async/sampler_idle_s", self.idle["sampler"])
        log("async/batches_ahead", float(self._process.batches_done - (itr + 1)))
        if self._process.uses_replay:
            log("async/replay_ratio", self.achieved_replay_ratio(itr))

    def achieved_replay_ratio(self, itr: int) -> float:
        """Gradient updates per env step since learning started, over batches 0..itr."""
        return self._replay_algo.replay_ratio_since_start(itr, self.local_per_itr)

    def _on_startup(self) -> None:
        self.idle = {"learner": 0.0, "sampler": 0.0}
        self._process.begin(self.agent, self.start_itr)  # the process starts on these

    def _on_restart(self, itr: int) -> None:
        self._process.begin(self.agent, itr)  # the checkpoint's weights, not the pre-restart
