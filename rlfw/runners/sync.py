"""SyncRunner: sample a batch, then learn from it; logging, evaluation, checkpoints,
restarts after a dead sampler worker."""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from rlfw.checks import NonFiniteError, check_positive
from rlfw.checkpoint import (latest_checkpoint, list_checkpoints, load_newest_valid,
                                    save_best, save_checkpoint)
from rlfw.distributed import RankGroup
from rlfw.logging import (CsvWriter, Logger, StdoutTable, TensorBoardWriter, Timing,
                          plot_learning_curve, tensorboard_available)
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.samplers.evaluation import EvalLimits
from rlfw.samplers.workers import WorkerError
from rlfw.seeding import capture_rng, restore_rng


@dataclass
class RunSchedule:
    """How long to train and how often to evaluate, log and checkpoint (in env steps).

    ``eval_every=None`` turns evaluation off (throughput runs). Evaluation is bounded by
    ``eval_max_episode_steps`` per episode and ``eval_max_steps`` per evaluation (agent
    steps; None: unbounded); episodes cut by them are logged as ``eval/episodes_cut``."""

    n_steps: int
    eval_every: int | None = 10_000
    eval_episodes: int = 10
    eval_greedy: bool = True
    eval_max_episode_steps: int | None = None
    eval_max_steps: int | None = None
    log_every: int = 10_000
    checkpoint_every: int = 50_000
    keep_checkpoints: int = 3
    stop_at_return: float | None = None  # stop once an evaluation mean reaches this
    max_restarts: int = 0                # sampler restarts from the newest checkpoint

    def validate(self) -> None:
        check_positive(n_steps=self.n_steps, eval_episodes=self.eval_episodes,
                       log_every=self.log_every, checkpoint_every=self.checkpoint_every,
                       keep_checkpoints=self.keep_checkpoints)
        if self.eval_every is not None:
            check_positive(eval_every=self.eval_every)
        self.eval_limits().validate()
        if isinstance(self.max_restarts, bool) or not isinstance(self.max_restarts, int) \
                or self.max_restarts < 0:
            raise ValueError(f"max_restarts must be an integer >= 0, got {self.max_restarts!r}")

    def eval_limits(self) -> EvalLimits:
        return EvalLimits(self.eval_max_episode_steps, self.eval_max_steps)


@dataclass
class TrainResult:
    env_steps: int
    iterations: int
    eval_return: float | None = None       # mean of the last evaluation; None: none yet
    best_eval_return: float | None = None
    eval_history: list[tuple[int, float]] = field(default_factory=list)
    interrupted: bool = False
    restarts: int = 0


def _every(steps: int, per_itr: int) -> int:
    return max(1, round(steps / per_itr))


class SyncRunner:
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
    """

    def __init__(self, algo, agent, sampler, schedule: RunSchedule, log_dir: str | None = None,
                 seed: int = 0, config: dict | None = None, resume: bool = False,
                 progress: bool = True, stdout: bool = True, ranks: RankGroup | None = None):
        schedule.validate()
        self.algo, self.agent, self.sampler = algo, agent, sampler
        self.schedule = schedule
        self.log_dir = log_dir
        self.seed = seed
        self.config = config or {}
        self.resume = resume
        self.ranks = ranks
        self.is_chief = ranks is None or ranks.is_chief
        self.world_size = 1 if ranks is None else ranks.world_size
        self.progress = progress and self.is_chief
        self.stdout = stdout and self.is_chief
        if resume and log_dir is None:
            raise ValueError("resume=True needs the log_dir of the run to continue")
        if schedule.max_restarts and log_dir is None:
            raise ValueError("max_restarts needs a log_dir: restarts resume from its checkpoints")
        if schedule.max_restarts and ranks is not None:
            raise ValueError("max_restarts restarts one rank's sampler, which would leave the "
                             "other ranks behind; in a multi-rank run use torchrun's own "
                             "--max-restarts with a fixed --log-dir (the restarted ranks "
                             "resume from the newest checkpoint)")
        if not self.is_chief:
            return  # rank 0 owns the run folder
        if resume:
            latest_checkpoint(log_dir)  # fails early, naming the folder, if there is none
        elif log_dir is not None and list_checkpoints(log_dir):
            raise ValueError(f"run folder {log_dir!r} already holds checkpoints; resume it "
                             "(--resume) or choose another log dir")

    def __enter__(self) -> "SyncRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.sampler.close()

    # -- the loop ------------------------------------------------------------------------
    def train(self) -> TrainResult:
        """Run to ``schedule.n_steps`` (or ``stop_at_return``); Ctrl-C keeps the newest
        checkpoint and returns with ``interrupted=True``."""
        self._startup()
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
        except KeyboardInterrupt:
            self.result.interrupted = True
            kept = (f"; the newest checkpoint in {self.log_dir} is kept (resume with --resume "
                    f"{self.log_dir})" if self.log_dir else "")
            self._say(f"interrupted at iteration {itr}{kept}")
        finally:
            self._shutdown()
        return self.result

    def _iteration(self, itr: int) -> bool:
        """Sample, learn, then evaluate/log/checkpoint when due; True: stop the run."""
        with self.timing.add_time("sample"):
            samples, episodes = self.sampler.obtain_samples(itr)
        if samples.policy_version is not None:
            samples.policy_version.fill_(itr)  # sampled with the weights after itr updates
        self.episodes += episodes
        self._learn(samples, itr)
        return self._after_update(itr)

    def _learn(self, samples, itr: int) -> None:
        """One update from batch ``itr``, timed and logged; a non-finite loss names it."""
        with self.timing.add_time("learn"):
            try:
                stats = self._update(samples, itr)
            except NonFiniteError as err:
                raise NonFiniteError(f"iteration {itr}: {err}; nothing of this iteration was "
                                     f"saved{self._newest_note()}") from None
        self.logger.record_many(stats)
        if samples is not None and samples.policy_version is not None:
            self.logger.record("train/policy_lag", float(itr - samples.policy_version.min()))

    def _update(self, samples, itr: int) -> dict[str, float]:
        return self.algo.optimize(samples, itr)

    def _after_update(self, itr: int) -> bool:
        """Count update ``itr`` as done, then evaluate/log/checkpoint when due; True: stop."""
        self.result.env_steps, self.result.iterations = (itr + 1) * self.per_itr, itr + 1
        self.bar.update(self.per_itr)
        done = itr + 1
        last = done == self.n_itr
        stop = False
        if self.eval_every and (done % self.eval_every == 0 or last):
            with self.timing.add_time("eval"):
                stop = self._run_evaluation() if self.is_chief else False
            if self.ranks is not None:  # every rank stops at the same iteration
                stop = self.ranks.broadcast(stop, "the stop decision")
        if done % self.log_every == 0 or last or stop:
            self._dump_logs()
        if done % self.checkpoint_every == 0 or last or stop:
            self._save(done)
        return stop

    # -- setup and teardown --------------------------------------------------------------
    def _startup(self) -> None:
        s = self.schedule
        if self.ranks is not None:
            self.ranks.broadcast_agent(self.agent)
        if not getattr(self.sampler, "initialized", False):
            self.sampler.initialize(self._sampling_agent())
        self.local_per_itr = self.sampler.batch_T * self.sampler.batch_B
        self.per_itr = self.local_per_itr * self.world_size  # env steps of all ranks
        self.n_itr = math.ceil(s.n_steps / self.per_itr)
        self.algo.initialize(self.agent, n_itr=self.n_itr, seed=self.seed, replicas=self.ranks)
        self.eval_every = _every(s.eval_every, self.per_itr) if s.eval_every else 0
        self.log_every = _every(s.log_every, self.per_itr)
        self.checkpoint_every = _every(s.checkpoint_every, self.per_itr)
        self.result = TrainResult(0, 0)
        self.restarts = 0
        self.start_itr = self._load_newest() if self.resume else 0
        self.logger = self._make_logger(append=self.resume)
        self.timing = Timing()
        self.episodes: list[EpisodeInfo] = []
        self.bar = tqdm(total=self.n_itr * self.per_itr, initial=self.start_itr * self.per_itr,
                        unit="step", disable=not self.progress, dynamic_ncols=True)
        self.last_dump = self.started = time.perf_counter()
        self.steps_at_dump = self.start_itr * self.per_itr
        if s.max_restarts and not list_checkpoints(self.log_dir):
            self._save(0)  # a restart needs a checkpoint to go back to

    def _sampling_agent(self):
        """The agent the sampler steps with: the learner's own here (no lag)."""
        return self.agent

    def _shutdown(self) -> None:
        self.bar.close()
        self.logger.close()
        if self.log_dir is not None and self.is_chief:
            plot_learning_curve(os.path.join(self.log_dir, "progress.csv"),
                                os.path.join(self.log_dir, "learning_curve.png"),
                                title=str(self.config.get("env", "")))

    def _say(self, line: str) -> None:
        if self.stdout:
            tqdm.write(line)

    # -- faults --------------------------------------------------------------------------
    def _restart_after(self, err: WorkerError) -> int:
        """Restart the sampler from the newest checkpoint, or re-raise when the restarts are
        spent; returns the iteration to continue from."""
        if self.restarts >= self.schedule.max_restarts:
            raise err
        self.restarts += 1
        first_line = str(err).splitlines()[0]
        self.sampler.close()
        self.sampler.initialize(self._sampling_agent())
        itr = self._load_newest()
        self._say(f"restart {self.restarts}/{self.schedule.max_restarts}: {first_line}; "
                  f"continuing from iteration {itr} ({itr * self.per_itr} env steps)")
        self.logger.record("run/restarts", float(self.restarts))
        self.bar.reset(total=self.n_itr * self.per_itr)
        self.bar.update(itr * self.per_itr)
        self.episodes = []
        return itr

    def _newest_note(self) -> str:
        found = list_checkpoints(self.log_dir) if self.log_dir is not None else []
        return f"; the newest checkpoint is {found[-1]}" if found else ""

    # -- evaluation and logging ----------------------------------------------------------
    def _run_evaluation(self) -> bool:
        """Evaluate, record, keep ``best.pt``; True when ``stop_at_return`` is reached."""
        s, result = self.schedule, self.result
        episodes = self.sampler.evaluate(s.eval_episodes, s.eval_greedy, s.eval_limits())
        whole = [e for e in episodes if not e.truncated]
        counted = whole or episodes  # only cut episodes: report them, flagged by the count
        returns = np.array([e.ret for e in counted])
        mean = float(returns.mean())
        self.logger.record("eval/return_mean", mean)
        self.logger.record("eval/return_std", float(returns.std()))
        self.logger.record("eval/length_mean", float(np.mean([e.length for e in counted])))
        self.logger.record("eval/episodes", float(len(whole)))
        self.logger.record("eval/episodes_cut", float(len(episodes) - len(whole)))
        if len(whole) < len(episodes):
            self._say(f"evaluation at {result.env_steps} steps: {len(episodes) - len(whole)} of "
                      f"{len(episodes)} episodes cut by the evaluation limits"
                      + ("" if whole else "; their partial returns are reported"))
        result.eval_return = mean
        result.eval_history.append((result.env_steps, mean))
        if result.best_eval_return is None or mean > result.best_eval_return:
            result.best_eval_return = mean
            if self.log_dir is not None:
                save_best(self.log_dir, {"agent": self.agent.state_dict(), "config": self.config,
                                         "env_steps": result.env_steps, "eval_return": mean})
        return s.stop_at_return is not None and mean >= s.stop_at_return

    def _dump_logs(self) -> None:
        logger, episodes = self.logger, self.episodes
        if episodes:
            logger.record("rollout/return_mean", float(np.mean([e.ret for e in episodes])))
            logger.record("rollout/length_mean", float(np.mean([e.length for e in episodes])))
            logger.record("rollout/episodes", float(len(episodes)))
        logger.record_many(self.timing.take())
        now = time.perf_counter()
        steps = self.result.env_steps - self.steps_at_dump
        logger.record("time/steps_per_second", steps / max(now - self.last_dump, 1e-9))
        logger.record("time/elapsed_s", now - self.started)  # since this process started
        self.episodes, self.last_dump, self.steps_at_dump = [], now, self.result.env_steps
        logger.dump(self.result.env_steps)

    def _make_logger(self, append: bool) -> Logger:
        if not self.is_chief:
            return Logger([])
        writers = []
        if self.stdout:
            writers.append(StdoutTable(tqdm.write))
        if self.log_dir is not None:
            os.makedirs(self.log_dir, exist_ok=True)
            with open(os.path.join(self.log_dir, "config.json"), "w") as f:
                json.dump(self.config, f, indent=2, sort_keys=True, default=str)
            writers.append(CsvWriter(os.path.join(self.log_dir, "progress.csv"), append=append))
            if tensorboard_available():
                writers.append(TensorBoardWriter(self.log_dir))
        return Logger(writers)

    # -- checkpoints ---------------------------------------------------------------------
    def _save(self, itr: int) -> None:
        if self.log_dir is None:
            return
        own = self._rank_state()
        others = []
        if self.ranks is not None:
            gathered = self.ranks.gather(own, "checkpoint state")
            if not self.is_chief:
                return
            others = gathered[1:]
        state = {"itr": itr, "result": self.result.__dict__, "agent": self.agent.state_dict(),
                 "config": self.config, **own}
        if others:
            state["ranks"] = others  # ranks 1.. (rank 0's state is the top level)
        save_checkpoint(self.log_dir, itr * self.per_itr, state, self.schedule.keep_checkpoints)

    def _rank_state(self) -> dict:
        """What differs between ranks: each has its own sampler, RNG streams, replay."""
        return {"algo": self.algo.state_dict(), "sampler": self.sampler.state_dict(),
                "rng": capture_rng(), **self._extra_state()}

    def _extra_state(self) -> dict:
        """What a runner kind adds to its checkpoints (nothing here)."""
        return {}

    def _load_extra_state(self, state: dict) -> None:
        pass

    def _load_newest(self) -> int:
        """Restore agent, algorithm, sampler and RNGs from the newest checkpoint that loads;
        returns its iteration."""
        state = self._load_chief_checkpoint() if self.is_chief else None
        if self.ranks is not None:
            state = self._scatter_checkpoint(state)
        self.agent.load_state_dict(state["agent"])
        self.algo.load_state_dict(state["algo"])
        self.sampler.load_state_dict(state["sampler"])
        restore_rng(state["rng"])
        self._load_extra_state(state)
        saved = dict(state["result"])
        saved["eval_history"] = [tuple(x) for x in saved.get("eval_history", [])]
        self.result = TrainResult(**saved)
        self.result.restarts = self.restarts
        return state["itr"]

    def _load_chief_checkpoint(self) -> dict:
        path, state, skipped = load_newest_valid(self.log_dir)
        for bad, why in skipped:
            self._say(f"skipped damaged checkpoint {bad}: {why}")
        saved_world = 1 + len(state.get("ranks", []))
        if saved_world != self.world_size:
            raise ValueError(f"checkpoint {path} holds {saved_world} rank(s) but this run has "
                             f"{self.world_size}; resume with the same number of ranks")
        return state

    def _scatter_checkpoint(self, state: dict | None) -> dict:
        """Rank 0's checkpoint to every rank: the shared part plus the rank's own state."""
        parts = None
        if self.is_chief:
            shared = {k: v for k, v in state.items() if k not in ("ranks",)}
            parts = [shared] + [{**shared, **own} for own in state.get("ranks", [])]
        return self.ranks.scatter(parts, "the checkpoint")

