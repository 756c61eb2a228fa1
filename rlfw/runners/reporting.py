"""The run's evaluation and logging: the run folder's ``config.json``, ``progress.csv``,
TensorBoard events and learning curve, the progress bar, and evaluations that keep
``best.pt``. Only the chief rank (rank 0) writes anything."""

from __future__ import annotations

import os
import time
from typing import Any, Protocol, cast

import numpy as np
from tqdm import tqdm

from rlfw.agents.base import Agent
from rlfw.envs import EnvFactory
from rlfw.logging import (
    CsvWriter,
    Logger,
    StdoutTable,
    TensorBoardWriter,
    Timing,
    plot_learning_curve,
    tensorboard_available,
)
from rlfw.logging.wandb_writer import WandbWriter
from rlfw.logging.writers import Writer
from rlfw.runfolder.checkpoint import save_best
from rlfw.runfolder.files import write_json
from rlfw.runners.schedule import RunSchedule, TrainResult
from rlfw.samplers.base import Sampler
from rlfw.samplers.episodes import EpisodeInfo


class _VideoSource(Protocol):
    """What a video is played from: a sampler's evaluation envs and seed (every
    ``SamplerBase`` has them; the ``Sampler`` protocol does not promise them)."""

    seed: int
    eval_env_factory: EnvFactory  # record_episodes refuses any other factory


class Reporter:
    """Logs statistics, training episodes and timings every ``log_every`` iterations, and
    runs the evaluations; ``open`` starts it for a run, ``close`` ends it."""

    def __init__(
        self,
        log_dir: str | None,
        config: dict[str, Any],
        schedule: RunSchedule,
        chief: bool,
        stdout: bool,
        progress: bool,
    ):
        self.log_dir, self.config, self.schedule = log_dir, config, schedule
        self.chief = chief
        self.stdout = stdout and chief
        self.progress = progress and chief

    def open(self, total_steps: int, done_steps: int, append: bool) -> None:
        """Start logging a run of ``total_steps`` env steps, ``done_steps`` of them done
        (a resumed run appends to its ``progress.csv``)."""
        self.logger = self._make_logger(done_steps if append else None)
        self.timing = Timing()
        self.episodes: list[EpisodeInfo] = []
        self._episodes_seen = 0  # of self.episodes, by new_episodes()
        self.bar = tqdm(
            total=total_steps,
            initial=done_steps,
            unit="step",
            disable=not self.progress,
            dynamic_ncols=True,
        )
        self.last_dump = self.started = time.perf_counter()
        self.steps_at_dump = done_steps
        every = self.schedule.video_every
        self.videos_due_done = done_steps // every if every else 0

    def say(self, line: str) -> None:
        if self.stdout:
            tqdm.write(line)

    def advance(self, steps: int) -> None:
        self.bar.update(steps)

    def rewind(self, total_steps: int, done_steps: int) -> None:
        """After a restart from a checkpoint: the bar back to it, the episodes since gone."""
        self.bar.reset(total=total_steps)
        self.bar.update(done_steps)
        self.episodes, self._episodes_seen = [], 0

    def new_episodes(self) -> dict[str, float]:
        """Return, length and count of the training episodes that ended since the last call
        (empty when none did): an iteration's share of the next row."""
        new = self.episodes[self._episodes_seen :]
        self._episodes_seen = len(self.episodes)
        if not new:
            return {}
        return {
            "rollout/return_mean": float(np.mean([e.ret for e in new])),
            "rollout/length_mean": float(np.mean([e.length for e in new])),
            "rollout/episodes": float(len(new)),
        }

    def evaluate(self, sampler: Sampler, agent: Agent, result: TrainResult) -> bool:
        """Evaluate, record, keep ``best.pt``; True when ``stop_at_return`` is reached."""
        s = self.schedule
        episodes = sampler.evaluate(s.eval_episodes, s.eval_greedy, s.eval_limits())
        whole = [e for e in episodes if not e.truncated]
        counted = whole or episodes  # only cut episodes: report them, flagged by the count
        returns = np.array([e.ret for e in counted])
        mean = float(returns.mean())
        self.last_eval = {
            "env_steps": float(result.env_steps),
            "eval/return_mean": mean,
            "eval/return_std": float(returns.std()),
            "eval/length_mean": float(np.mean([e.length for e in counted])),
            "eval/episodes": float(len(whole)),
            "eval/episodes_cut": float(len(episodes) - len(whole)),
        }
        successes = [e.success for e in counted if e.success is not None]
        if successes:  # goal-conditioned envs report whether the goal was reached
            self.last_eval["eval/success_rate"] = float(np.mean(successes))
        self.logger.record_many({k: v for k, v in self.last_eval.items() if k != "env_steps"})
        if len(whole) < len(episodes):
            self.say(
                f"evaluation at {result.env_steps} steps: {len(episodes) - len(whole)} of "
                f"{len(episodes)} episodes cut by the evaluation limits"
                + ("" if whole else "; their partial returns are reported")
            )
        result.eval_return = mean
        result.eval_history.append((result.env_steps, mean))
        self._record_video(sampler, agent, result.env_steps)
        if result.best_eval_return is None or mean > result.best_eval_return:
            result.best_eval_return = mean
            if self.log_dir is not None:
                save_best(
                    self.log_dir,
                    {
                        "agent": agent.state_dict(),
                        "config": self.config,
                        "env_steps": result.env_steps,
                        "eval_return": mean,
                    },
                )
        return s.stop_at_return is not None and mean >= s.stop_at_return

    def _record_video(self, sampler: Sampler, agent: Agent, env_steps: int) -> None:
        """Past the next multiple of ``video_every``: one evaluation episode (the first of
        an evaluation's, replayed on a rendering env) into ``videos/``."""
        every = self.schedule.video_every
        if not every or self.log_dir is None or env_steps // every <= self.videos_due_done:
            return
        from rlfw.samplers.machinery.video import record_episodes

        self.videos_due_done = env_steps // every
        s = self.schedule
        source = cast(_VideoSource, sampler)
        _, written = record_episodes(
            agent,
            source.eval_env_factory,
            os.path.join(self.log_dir, "videos"),
            1,
            s.eval_greedy,
            source.seed,
            s.eval_limits(),
            f"step-{env_steps:012d}-",
        )
        for files in written:
            self.logger.video("eval/video", files[0], env_steps)

    def dump(self, env_steps: int) -> None:
        """Write one row: the episodes, timings and throughput since the last one."""
        logger, episodes = self.logger, self.episodes
        if episodes:
            logger.record("rollout/return_mean", float(np.mean([e.ret for e in episodes])))
            logger.record("rollout/length_mean", float(np.mean([e.length for e in episodes])))
            logger.record("rollout/episodes", float(len(episodes)))
        logger.record_many(self.timing.take())
        now = time.perf_counter()
        steps = env_steps - self.steps_at_dump
        logger.record("time/steps_per_second", steps / max(now - self.last_dump, 1e-9))
        logger.record("time/elapsed_s", now - self.started)  # since this process started
        self.episodes, self.last_dump, self.steps_at_dump = [], now, env_steps
        self._episodes_seen = 0
        logger.dump(env_steps)

    def close(self) -> None:
        self.bar.close()
        self.logger.close()
        if self.log_dir is not None and self.chief:
            plot_learning_curve(
                os.path.join(self.log_dir, "progress.csv"),
                os.path.join(self.log_dir, "learning_curve.png"),
                title=str(self.config.get("env", "")),
            )

    def _make_logger(self, resumed_at: int | None) -> Logger:
        """Writers for a run starting afresh, or resumed from the checkpoint at env step
        ``resumed_at`` (its progress.csv and TensorBoard events are cut back to that step)."""
        if not self.chief:
            return Logger([])
        writers: list[Writer] = []
        if self.stdout:
            writers.append(StdoutTable(tqdm.write))
        if self.log_dir is not None:
            os.makedirs(self.log_dir, exist_ok=True)
            write_json(os.path.join(self.log_dir, "config.json"), self.config)
            writers.append(
                CsvWriter(
                    os.path.join(self.log_dir, "progress.csv"),
                    append=resumed_at is not None,
                    upto_step=resumed_at,
                )
            )
            if tensorboard_available():
                writers.append(
                    TensorBoardWriter(self.log_dir, None if resumed_at is None else resumed_at + 1)
                )
            wandb = self.config.get("wandb") or {}
            if wandb.get("enabled"):
                writers.append(WandbWriter(self.log_dir, wandb, self.config))
        return Logger(writers)
