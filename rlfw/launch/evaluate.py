"""Evaluate a finished (or running) run from its folder."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import numpy as np

from rlfw.envs import EnvSpaces
from rlfw.launch.build import build_agent
from rlfw.launch.config import RunConfig
from rlfw.runfolder.checkpoint import BEST, checkpoint_dir, load_newest_valid
from rlfw.runfolder.policy_folder import WEIGHTS, is_policy_folder, load_policy_weights
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.samplers.machinery.evaluation import Evaluator
from rlfw.utils.checks import check_positive, check_seed


def load_for_evaluation(
    run_dir: str,
    best: bool = False,
    trust: bool = False,
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> tuple[str, dict[str, Any]]:
    """``(path, state)`` of the run's newest checkpoint that loads, ``best.pt`` first with
    ``best=True``. Env state is not needed to evaluate, so sealed pickles are dropped unread:
    a run folder from someone else evaluates without trusting it. Each file passed over is
    named, with why, through ``say``. A policy folder (``rlfw export``) gives its weights."""
    if is_policy_folder(run_dir):
        if best:
            raise ValueError(
                f"{run_dir!r} is an exported policy folder: it holds one "
                "policy, so --best is only for run folders"
            )
        return os.path.join(run_dir, WEIGHTS), {"agent": load_policy_weights(run_dir)}
    first = None
    if best:
        first = os.path.join(checkpoint_dir(run_dir), BEST)
        if not os.path.exists(first):
            raise FileNotFoundError(
                f"no {BEST} in {checkpoint_dir(run_dir)!r}: it is written "
                "at the first evaluation of a training run"
            )
    path, state, skipped = load_newest_valid(run_dir, "trust" if trust else "drop", first)
    for bad, why in skipped:
        say(f"rlfw: skipped checkpoint {bad}: {why}")
    return path, state


def evaluate_checkpoint(
    run_dir: str,
    n_episodes: int,
    greedy: bool | None = None,
    seed: int = 12345,
    best: bool = False,
    trust: bool = False,
    config: RunConfig | None = None,
    video_dir: str | None = None,
) -> np.ndarray:
    """Returns of ``n_episodes`` played on eval envs by the agent of the run's newest
    checkpoint that loads, or of ``checkpoints/best.pt`` with ``best=True`` (falling back to
    the newest good checkpoint); ``greedy=None`` evaluates as the run did. ``config``: the
    run's, checked by the caller (default: its ``config.json``). ``video_dir``: play them
    on one rendering env and write a video of each there (``rlfw.launch.video``)."""
    episodes = evaluate_episodes(run_dir, n_episodes, greedy, seed, best, trust, config, video_dir)
    return np.array([e.ret for e in episodes])


def evaluate_episodes(
    run_dir: str,
    n_episodes: int,
    greedy: bool | None = None,
    seed: int = 12345,
    best: bool = False,
    trust: bool = False,
    config: RunConfig | None = None,
    video_dir: str | None = None,
) -> list[EpisodeInfo]:
    """As ``evaluate_checkpoint``, each episode's record (its return, length and, on
    goal-conditioned envs, success; with ``video_dir`` the returns only)."""
    check_positive(episodes=n_episodes)  # the name of rlfw eval's flag
    check_seed(seed)
    config = config or RunConfig.load(run_dir)
    greedy = config.schedule.eval_greedy if greedy is None else greedy
    _, state = load_for_evaluation(run_dir, best, trust)
    env_factory = config.env_factory().resolved()
    agent = build_agent(config, EnvSpaces.of(env_factory))
    agent.load_state_dict(state["agent"])
    if video_dir is not None:
        from rlfw.samplers.machinery.video import record_episodes

        returns, _ = record_episodes(
            agent, env_factory, video_dir, n_episodes, greedy, seed, config.schedule.eval_limits()
        )
        return [EpisodeInfo(float(r), 0, 0) for r in returns]
    evaluator = Evaluator(env_factory, min(config.n_eval_envs, n_episodes), seed)
    try:
        episodes = evaluator.run(
            agent, n_episodes, greedy=greedy, limits=config.schedule.eval_limits()
        )
    finally:
        evaluator.close()
    return episodes
