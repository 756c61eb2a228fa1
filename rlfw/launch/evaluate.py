"""Evaluate a finished (or running) run from its folder."""
from __future__ import annotations

import numpy as np

from rlfw.envs import EnvSpaces
from rlfw.launch.checkpoint import latest_checkpoint, load_checkpoint
from rlfw.launch.config import RunConfig, build_agent
from rlfw.samplers.evaluation import Evaluator


def evaluate_run(run_dir: str, n_episodes: int, greedy: bool = True,
                 seed: int = 12345) -> np.ndarray:
    """Returns of ``n_episodes`` played by the newest checkpoint's agent on eval envs."""
    config = RunConfig.load(run_dir)
    path = latest_checkpoint(run_dir)
    env_factory = config.env_factory()
    agent = build_agent(config, EnvSpaces.of(env_factory))
    agent.load_state_dict(load_checkpoint(path)["agent"])
    evaluator = Evaluator(env_factory, min(config.n_eval_envs, n_episodes), seed)
    try:
        episodes = evaluator.run(agent, n_episodes, greedy=greedy)
    finally:
        evaluator.close()
    return np.array([e.ret for e in episodes])
