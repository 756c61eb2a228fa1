"""SyncRunner: sample a batch, then learn from it; logging, evaluation, checkpoints."""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from rlfw.launch.checkpoint import (capture_rng, latest_checkpoint, list_checkpoints,
                                    load_checkpoint, restore_rng, save_checkpoint)
from rlfw.logging import (CsvWriter, Logger, StdoutTable, TensorBoardWriter, Timing,
                          plot_learning_curve, tensorboard_available)
from rlfw.samplers.base import EpisodeInfo, check_positive


@dataclass
class RunSchedule:
    """How long to train and how often to evaluate, log and checkpoint (in env steps)."""

    n_steps: int
    eval_every: int = 10_000
    eval_episodes: int = 10
    eval_greedy: bool = True
    log_every: int = 10_000
    checkpoint_every: int = 50_000
    keep_checkpoints: int = 3
    stop_at_return: float | None = None  # stop once an evaluation mean reaches this
    evaluate: bool = True                # False: no evaluation at all (throughput runs)

    def validate(self) -> None:
        check_positive(n_steps=self.n_steps, eval_every=self.eval_every,
                       eval_episodes=self.eval_episodes, log_every=self.log_every,
                       checkpoint_every=self.checkpoint_every,
                       keep_checkpoints=self.keep_checkpoints)


@dataclass
class TrainResult:
    env_steps: int
    iterations: int
    eval_return: float          # mean of the last evaluation
    best_eval_return: float
    eval_history: list[tuple[int, float]] = field(default_factory=list)
    interrupted: bool = False


def _every(steps: int, per_itr: int) -> int:
    return max(1, round(steps / per_itr))


class SyncRunner:
    """Composes algorithm, agent and sampler. ``log_dir`` gets ``config.json``,
    ``progress.csv``, TensorBoard events, ``checkpoints/`` and ``learning_curve.png``.

    ``resume=True`` continues from the newest checkpoint in ``log_dir`` so that the run ends
    bitwise identical to an uninterrupted one.
    """

    def __init__(self, algo, agent, sampler, schedule: RunSchedule, log_dir: str | None = None,
                 seed: int = 0, config: dict | None = None, resume: bool = False,
                 progress: bool = True, stdout: bool = True):
        schedule.validate()
        self.algo, self.agent, self.sampler = algo, agent, sampler
        self.schedule = schedule
        self.log_dir = log_dir
        self.seed = seed
        self.config = config or {}
        self.resume = resume
        self.progress = progress
        self.stdout = stdout
        if resume and log_dir is None:
            raise ValueError("resume=True needs the log_dir of the run to continue")
        if resume:
            self._resume_path = latest_checkpoint(log_dir)  # fails early if there is none
        elif log_dir is not None and list_checkpoints(log_dir):
            raise ValueError(f"run folder {log_dir!r} already holds checkpoints; resume it "
                             "(--resume) or choose another log dir")

    def train(self) -> TrainResult:
        s = self.schedule
        sampler, algo = self.sampler, self.algo
        sampler.initialize(self.agent)
        per_itr = sampler.batch_T * sampler.batch_B
        n_itr = math.ceil(s.n_steps / per_itr)
        algo.initialize(self.agent, n_itr=n_itr, seed=self.seed)
        eval_every, log_every = _every(s.eval_every, per_itr), _every(s.log_every, per_itr)
        ckpt_every = _every(s.checkpoint_every, per_itr)
        result = TrainResult(0, 0, float("nan"), float("-inf"))
        start_itr = 0
        if self.resume:
            start_itr, result = self._load(self._resume_path)
        logger = self._make_logger(append=self.resume)
        timing = Timing()
        episodes: list[EpisodeInfo] = []
        bar = tqdm(total=n_itr * per_itr, initial=start_itr * per_itr, unit="step",
                   disable=not self.progress, dynamic_ncols=True)
        last_dump, steps_at_dump = time.perf_counter(), start_itr * per_itr
        itr = start_itr
        try:
            for itr in range(start_itr, n_itr):
                with timing.add_time("sample"):
                    samples, new_episodes = sampler.obtain_samples(itr)
                with timing.add_time("learn"):
                    stats = algo.optimize(samples, itr)
                episodes += new_episodes
                logger.record_many(stats)
                result.env_steps, result.iterations = (itr + 1) * per_itr, itr + 1
                bar.update(per_itr)
                last = itr + 1 == n_itr
                stop = False
                if s.evaluate and ((itr + 1) % eval_every == 0 or last):
                    with timing.add_time("eval"):
                        stop = self._evaluate(logger, result)
                if (itr + 1) % log_every == 0 or last or stop:
                    now = time.perf_counter()
                    self._record_rollout(logger, episodes, timing, now - last_dump,
                                         result.env_steps - steps_at_dump)
                    episodes, last_dump, steps_at_dump = [], now, result.env_steps
                    logger.dump(result.env_steps)
                if (itr + 1) % ckpt_every == 0 or last or stop:
                    self._save(itr + 1, result)
                if stop:
                    break
        except KeyboardInterrupt:
            result.interrupted = True
            bar.write(f"interrupted at iteration {itr}; the newest checkpoint in "
                      f"{self.log_dir} is kept (resume with --resume {self.log_dir})")
        finally:
            bar.close()
            logger.close()
            sampler.close()
        self._plot()
        return result

    def _evaluate(self, logger: Logger, result: TrainResult) -> bool:
        s = self.schedule
        eps = self.sampler.evaluate(s.eval_episodes, greedy=s.eval_greedy)
        returns = np.array([e.ret for e in eps])
        mean = float(returns.mean())
        logger.record("eval/return_mean", mean)
        logger.record("eval/return_std", float(returns.std()))
        logger.record("eval/length_mean", float(np.mean([e.length for e in eps])))
        result.eval_return = mean
        result.best_eval_return = max(result.best_eval_return, mean)
        result.eval_history.append((result.env_steps, mean))
        return s.stop_at_return is not None and mean >= s.stop_at_return

    @staticmethod
    def _record_rollout(logger: Logger, episodes: list[EpisodeInfo], timing: Timing,
                        seconds: float, steps: int) -> None:
        if episodes:
            logger.record("rollout/return_mean", float(np.mean([e.ret for e in episodes])))
            logger.record("rollout/length_mean", float(np.mean([e.length for e in episodes])))
            logger.record("rollout/episodes", float(len(episodes)))
        logger.record_many(timing.take())
        logger.record("time/steps_per_second", steps / max(seconds, 1e-9))

    def _make_logger(self, append: bool) -> Logger:
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

    def _save(self, itr: int, result: TrainResult) -> None:
        if self.log_dir is None:
            return
        state = {
            "itr": itr, "result": result.__dict__, "agent": self.agent.state_dict(),
            "algo": self.algo.state_dict(), "sampler": self.sampler.state_dict(),
            "rng": capture_rng(), "config": self.config,
        }
        save_checkpoint(self.log_dir, result.env_steps, state, self.schedule.keep_checkpoints)

    def _load(self, path: str) -> tuple[int, TrainResult]:
        state = load_checkpoint(path)
        self.agent.load_state_dict(state["agent"])
        self.algo.load_state_dict(state["algo"])
        self.sampler.load_state_dict(state["sampler"])
        restore_rng(state["rng"])
        return state["itr"], TrainResult(**state["result"])

    def _plot(self) -> None:
        if self.log_dir is not None:
            plot_learning_curve(os.path.join(self.log_dir, "progress.csv"),
                                os.path.join(self.log_dir, "learning_curve.png"),
                                title=str(self.config.get("env", "")))
