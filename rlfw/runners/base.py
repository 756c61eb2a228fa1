"""Runner: the loop every runner kind shares (sample -> optimize -> evaluate / log /
checkpoint when due), with startup, shutdown, Ctrl-C and restarts after a dead sampler.

The kinds (``SyncRunner``, ``ConcurrentRunner``, ``AsyncRunner``) fill in ``_iteration``
(how a batch is obtained and learned from) and, where they need to, the hooks
``_sampling_agent``, ``_on_startup``, ``_on_restart``, ``_settle`` and the state they
add to checkpoints (``_extra_state`` / ``_load_extra_state``). Evaluation and logging
(``Reporter``) and checkpoints across ranks (``RunCheckpoints``) are parts it calls.
"""

from __future__ import annotations

import math
from typing import Any, Sequence, cast

import torch

from rlfw.agents.base import Agent
from rlfw.algos.base import Algorithm
from rlfw.buffers import Samples
from rlfw.runfolder.claim import check_run_folder, claim_run_folder
from rlfw.runfolder.folder_lock import FolderLock
from rlfw.runners.callbacks import CallbackList
from rlfw.runners.checkpointing import RunCheckpoints
from rlfw.runners.reporting import Reporter
from rlfw.runners.schedule import RunSchedule, TrainResult, iterations_per
from rlfw.samplers.base import Sampler
from rlfw.samplers.machinery.workers import WorkerError
from rlfw.utils.checks import NonFiniteError
from rlfw.utils.distributed import RankGroup
from rlfw.utils.interrupts import deferred_interrupt
from rlfw.utils.seeding import capture_rng, restore_rng


def policy_versions(samples: Samples) -> torch.Tensor:
    """``samples.policy_version``: every sampler's buffer has one (``allocate_samples``), only
    the field's default is None."""
    return cast(torch.Tensor, samples.policy_version)


class Runner:
    """Composes algorithm, agent and sampler. ``log_dir`` gets ``config.json``,
    ``progress.csv``, TensorBoard events, ``checkpoints/`` (the newest N plus ``best.pt``)
    and ``learning_curve.png``.

    ``resume=True`` continues from the newest checkpoint in ``log_dir`` that loads, so that
    the run ends bitwise identical to an uninterrupted one. The caller owns the sampler's
    lifetime: ``train`` initializes it if needed and leaves it open (``with runner:`` or
    ``with sampler:`` closes it), so ``sampler.evaluate`` still works afterwards.

    ``ranks`` (a ``RankGroup``, from ``torchrun``) makes this one replica of a multi-rank
    run: gradients averaged across ranks, env steps counted over all ranks, and only rank 0
    logs, evaluates and writes checkpoints (holding every rank's state).

    The chief holds ``log_dir``'s lock from construction until ``train`` returns (``lock``:
    one its builder already took); a second run into the folder is refused.

    ``trust_checkpoint=True`` resumes from checkpoints that hold pickled objects (written
    before the safe format, or env state sealed by another user): loading those can run
    code, so only for a run folder whose source the user trusts (``--trust-checkpoint``).

    ``callbacks`` are observers of the run (``rlfw.runners.callbacks``: custom metrics,
    stopping rules); an ``on_iteration`` that returns ``False`` stops it with a checkpoint.
    """

    def __init__(
        self,
        algo: Algorithm,
        agent: Agent,
        sampler: Sampler,
        schedule: RunSchedule,
        log_dir: str | None = None,
        seed: int = 0,
        config: dict[str, Any] | None = None,
        resume: bool = False,
        progress: bool = True,
        stdout: bool = True,
        ranks: RankGroup | None = None,
        trust_checkpoint: bool = False,
        lock: FolderLock | None = None,
        callbacks: Sequence[Any] = (),
    ):
        schedule.validate()
        self.callbacks = CallbackList(callbacks)  # the same on every rank: the chief calls them
        self._update_stats: dict[str, float] = {}
        self.check_algo(type(algo))
        self.algo, self.agent, self.sampler = algo, agent, sampler
        self.schedule = schedule
        self.log_dir = log_dir
        self.seed = seed
        self.config = config or {}
        self.resume = resume
        self.ranks = ranks
        self.is_chief = ranks is None or ranks.is_chief
        self.world_size = 1 if ranks is None else ranks.world_size
        if agent.per_step_statistics:
            self.check_per_step_statistics(self.world_size)
        if resume and log_dir is None:
            raise ValueError("resume=True needs the log_dir of the run to continue")
        if schedule.max_restarts and log_dir is None:
            raise ValueError("max_restarts needs a log_dir: restarts resume from its checkpoints")
        if schedule.max_restarts and ranks is not None:
            raise ValueError(
                "max_restarts restarts one rank's sampler, which would leave the "
                "other ranks behind; in a multi-rank run use torchrun's own "
                "--max-restarts with a fixed --log-dir (the restarted ranks "
                "resume from the newest checkpoint)"
            )
        self.reporter = Reporter(log_dir, self.config, schedule, self.is_chief, stdout, progress)
        self.checkpoints = RunCheckpoints(
            log_dir, ranks, schedule.keep_checkpoints, self.reporter.say, trust=trust_checkpoint
        )
        self.lock = lock
        if log_dir is not None and self.is_chief:  # rank 0 owns the run folder
            if lock is None:
                self.lock = claim_run_folder(log_dir, resume)
            else:
                check_run_folder(log_dir, resume)

    # True where the sampler acts with the learner's own agent (not a copy of its weights)
    samples_with_learner_agent = True
    # True where another process appends to a replay algorithm's replay (the async runner)
    shares_replay = False
    # constructor argument -> the RunConfig field it is built from (the async runner's lead)
    config_fields: dict[str, str] = {}

    @classmethod
    def check_per_step_statistics(cls, world_size: int = 1, name: str | None = None) -> None:
        """The rule, for this kind (registered as ``name``) over ``world_size`` ranks:
        per-step observation statistics are updated where the policy acts, so the learner's
        own agent must sample, in one rank."""
        if cls.samples_with_learner_agent and world_size == 1:
            return
        who = cls.__name__ if name is None else f"runner {name!r}"
        ranks = f" with {world_size} ranks" if world_size > 1 else ""
        raise ValueError(
            f"{who}{ranks} cannot run an agent with per-step observation "
            "statistics: they are updated where the policy acts, so the "
            "learner's agent must be the one sampling, in one rank; use the sync "
            "runner with one rank, or obs_norm_update='batch'"
        )

    @classmethod
    def check_algo(cls, algo_cls: type, name: str | None = None) -> None:
        """``ValueError`` if this runner kind cannot run algorithms of ``algo_cls``
        (registered as ``name``)."""

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.sampler.close()
        self.release_folder()

    def release_folder(self) -> None:
        """Let another run into ``log_dir`` (done when ``train`` returns; idempotent)."""
        if self.lock is not None:
            self.lock.release()

    # -- the loop ------------------------------------------------------------------------
    def train(self) -> TrainResult:
        """Run to ``schedule.n_steps`` (or ``stop_at_return``); Ctrl-C keeps the newest
        checkpoint and returns with ``interrupted=True``."""
        try:
            self._startup()
        except BaseException:  # Ctrl-C or a failure while starting: the caller reports it
            self.release_folder()
            raise
        itr = self.start_itr
        try:
            while itr < self.n_itr:
                try:
                    stop = self._iteration(itr)
                except WorkerError as err:
                    itr = self._restart_after(err)
                    continue
                itr += 1
                if stop:
                    break
            self._end()
        except KeyboardInterrupt:
            self.result.interrupted = True
            newest = self.checkpoints.newest()
            kept = (
                ""
                if self.log_dir is None
                else (
                    f"; the newest checkpoint {newest} is kept (resume with --resume "
                    f"{self.log_dir})"
                    if newest
                    else "; no checkpoint was written yet"
                )
            )
            self.reporter.say(f"interrupted at iteration {itr}{kept}")
            self._end()
        finally:
            try:
                self._shutdown()
            finally:
                self.release_folder()
        return self.result

    def _end(self) -> None:
        if self.is_chief:
            self.callbacks.on_end(self.result)

    def _iteration(self, itr: int) -> bool:
        """Obtain batch ``itr``, learn from it (``_learn``), then ``_after_update``;
        True: stop the run."""
        raise NotImplementedError

    def _learn(self, samples: Samples, itr: int) -> None:
        """One update from batch ``itr``, timed and logged; a non-finite loss names it."""
        with self.reporter.timing.add_time("learn"):
            try:
                stats = self._update(samples, itr)
            except NonFiniteError as err:
                raise NonFiniteError(
                    f"iteration {itr}: {err}; nothing of this iteration was "
                    f"saved{self.checkpoints.newest_note()}"
                ) from None
        self.reporter.logger.record_many(stats)
        self._update_stats = stats

    def _update(self, samples: Samples, itr: int) -> dict[str, float]:
        return self.algo.optimize(samples, itr)

    def _record_policy_lag(self, samples: Samples, itr: int) -> None:
        """How many updates older than the learner the batch's sampling weights were."""
        lag = float(itr - policy_versions(samples).min())
        self.reporter.logger.record("train/policy_lag", lag)

    def _after_update(self, itr: int) -> bool:
        """Count update ``itr`` as done, then evaluate/log/checkpoint when due; True: stop."""
        self.result.env_steps, self.result.iterations = (itr + 1) * self.per_itr, itr + 1
        self.reporter.advance(self.per_itr)
        done = itr + 1
        last = done == self.n_itr
        stop = False
        evaluated = bool(self.eval_every) and (done % self.eval_every == 0 or last)
        if evaluated and self.is_chief:
            with self.reporter.timing.add_time("eval"):
                stop = self.reporter.evaluate(self.sampler, self.agent, self.result)
            self.callbacks.on_eval(self.reporter.last_eval)
        if self.is_chief and self.callbacks:
            stop = self._ask_callbacks(done) or stop
        if self.ranks is not None and (evaluated or self.callbacks):
            stop = self.ranks.broadcast(stop, "the stop decision")  # all stop at one itr
        with deferred_interrupt():  # Ctrl-C after the row and the checkpoint, never inside
            # an evaluation gets a row of its own: the logger averages what a row collects,
            # and two evaluations in one row (the last scheduled one and the end-of-run one)
            # would read as one score that neither policy had
            if done % self.log_every == 0 or last or stop or evaluated:
                self.reporter.dump(self.result.env_steps)
            if done % self.checkpoint_every == 0 or last or stop:
                self._save(done)
        return stop

    def _ask_callbacks(self, done: int) -> bool:
        """Iteration ``done``'s metrics to the callbacks; True when one stops the run."""
        metrics = {
            "iteration": float(done),
            "env_steps": float(self.result.env_steps),
            **self._update_stats,
            **self.reporter.new_episodes(),
        }
        stopper = self.callbacks.on_iteration(metrics)
        if stopper is None:
            return False
        self.result.stopped_by = stopper
        self.reporter.say(
            f"callback {stopper} stopped the run at {self.result.env_steps} "
            "env steps; a checkpoint is written"
        )
        return True

    # -- setup and teardown --------------------------------------------------------------
    def _startup(self) -> None:
        s = self.schedule
        if self.ranks is not None:
            self.ranks.broadcast_agent(self.agent)
        if not self.sampler.initialized:
            self.sampler.initialize(self._sampling_agent())
        self.local_per_itr = self.sampler.batch_T * self.sampler.batch_B
        self.per_itr = self.local_per_itr * self.world_size  # env steps of all ranks
        self.n_itr = math.ceil(s.n_steps / self.per_itr)
        self.algo.initialize(self.agent, n_itr=self.n_itr, seed=self.seed, replicas=self.ranks)
        self.eval_every = iterations_per(s.eval_every, self.per_itr) if s.eval_every else 0
        self.log_every = iterations_per(s.log_every, self.per_itr)
        self.checkpoint_every = iterations_per(s.checkpoint_every, self.per_itr)
        self.result = TrainResult(0, 0)
        self.restarts = 0
        self.start_itr = self._load_newest() if self.resume else 0
        self.reporter.open(
            self.n_itr * self.per_itr, self.start_itr * self.per_itr, append=self.resume
        )
        if s.max_restarts and not self.checkpoints.exist():
            self._save(0)  # a restart needs a checkpoint to go back to
        self._on_startup()
        if self.is_chief:
            self.callbacks.on_start(self)

    def _sampling_agent(self) -> Agent:
        """The agent the sampler steps with: the learner's own unless a kind says."""
        return self.agent

    def _on_startup(self) -> None:
        """A kind's own start, once the sampler runs and any checkpoint is loaded."""

    def _shutdown(self) -> None:
        self._settle()
        with deferred_interrupt():  # a second Ctrl-C must not cut the writers' close
            self.reporter.close()

    def _settle(self) -> None:
        """Wait for what a kind has in flight, before a shutdown or a restart closes the
        sampler (also after a failure: that failure is the one to report)."""

    # -- faults --------------------------------------------------------------------------
    def _restart_after(self, err: WorkerError) -> int:
        """Restart the sampler from the newest checkpoint, or re-raise when the restarts are
        spent; returns the iteration to continue from."""
        if self.restarts >= self.schedule.max_restarts:
            raise err
        self.restarts += 1
        first_line = str(err).splitlines()[0]
        self._settle()
        self.sampler.close()
        self.sampler.initialize(self._sampling_agent())
        itr = self._load_newest()
        self.reporter.say(
            f"restart {self.restarts}/{self.schedule.max_restarts}: "
            f"{first_line}; continuing from iteration {itr} "
            f"({itr * self.per_itr} env steps)"
        )
        self.reporter.logger.record("run/restarts", float(self.restarts))
        self.reporter.rewind(self.n_itr * self.per_itr, itr * self.per_itr)
        self._on_restart(itr)
        return itr

    def _on_restart(self, itr: int) -> None:
        """A kind's own part of a restart from iteration ``itr``'s checkpoint."""

    # -- checkpoints ---------------------------------------------------------------------
    def _save(self, itr: int) -> None:
        def shared() -> dict[str, Any]:
            return {
                "itr": itr,
                "result": self.result.__dict__,
                "agent": self.agent.state_dict(),
                "config": self.config,
            }

        if self.log_dir is not None:
            path = self.checkpoints.save(itr * self.per_itr, shared, self._rank_state())
            if path is not None:
                self.callbacks.on_checkpoint(path, itr * self.per_itr)

    def _rank_state(self) -> dict[str, Any]:
        """What differs between ranks: each has its own sampler, RNG streams, replay."""
        return {
            "algo": self.algo.state_dict(),
            "sampler": self.sampler.state_dict(),
            "rng": capture_rng(),
            **self._extra_state(),
        }

    def _extra_state(self) -> dict[str, Any]:
        """What a runner kind adds to its checkpoints (nothing by default)."""
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        """Take back what ``_extra_state`` saved."""

    def _load_newest(self) -> int:
        """Restore agent, algorithm, sampler and RNGs from the newest checkpoint that loads;
        returns its iteration."""
        state = self.checkpoints.load_newest()
        self.agent.load_state_dict(state["agent"])
        self.algo.load_state_dict(state["algo"])
        self.sampler.load_state_dict(state["sampler"])
        restore_rng(state["rng"])
        self._load_extra_state(state)
        saved = dict(state["result"])
        saved["eval_history"] = [tuple(x) for x in saved.get("eval_history", [])]
        self.result = TrainResult(**saved)
        self.result.restarts = self.restarts
        itr: int = state["itr"]
        return itr
