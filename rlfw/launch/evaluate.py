"""Evaluate a finished (or running) run from its folder."""
from __future__ import annotations

import numpy as np

from rlfw.envs import EnvSpaces
from rlfw.checkpoint import best_checkpoint, load_checkpoint, load_newest_valid
from rlfw.launch.build import build_agent
from rlfw.launch.config import RunConfig
from rlfw.samplers.evaluation import Evaluator


def evaluate_checkpoint(run_dir: str, n_episodes: int, greedy: bool | None = None,
                        seed: int = 12345, best: bool = False) -> np.ndarray:
    """Returns of ``n_episodes`` played on eval envs by the agent of the run's newest
    checkpoint that loads, or of ``checkpoints/best.pt`` with ``best=True``; ``greedy=None``
    evaluates as the run did."""
    config = RunConfig.load(run_dir)
    greedy = config.schedule.eval_greedy if greedy is None else greedy
    state = load_checkpoint(best_checkpoint(run_dir)) if best else load_newest_valid(run_dir)[1]
    env_factory = config.env_factory()
    agent = build_agent(config, EnvSpaces.of(env_factory))
    agent.load_state_dict(state["agent"])
    evaluator = Evaluator(env_factory, min(config.n_eval_envs, n_episodes), seed)
    try:
        episodes = evaluator.run(agent, n_episodes, greedy=greedy,
                                 limits=config.schedule.eval_limits())
    finally:
        evaluator.close()
    return np.array([e.ret for e in episodes])
