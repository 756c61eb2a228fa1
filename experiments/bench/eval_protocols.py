"""Does rlfw's evaluation score a policy as SB3's ``evaluate_policy`` would?

The benchmark suites compare final returns: rlfw's through its evaluator (``n_eval_envs``
envs, each playing its quota of episodes, every episode from a seeded reset), SB3's through
``evaluate_policy`` on one env seeded once. This plays one run's final policy both ways on
the same eval envs, greedy, for ``--episodes`` each, and prints the two means with their
standard errors: a protocol that favoured short (or long) episodes would show here.

    python experiments/bench/eval_protocols.py RUN_DIR [--episodes 100] [--seed 0]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from rlfw.envs import EnvSpaces
from rlfw.launch.build import build_agent
from rlfw.launch.config import RunConfig
from rlfw.launch.evaluate import evaluate_checkpoint, load_for_evaluation

EVAL_SEED_OFFSET = 10_000  # the benchmark's (rlfw.bench.run)


def one_env_greedy_returns(run_dir: str, episodes: int, seed: int) -> np.ndarray:
    """SB3's protocol: one env reset with ``seed`` once, argmax actions, episodes in a row."""
    config = RunConfig.load(run_dir)
    _, state = load_for_evaluation(run_dir, False, False)
    factory = config.env_factory().resolved()
    agent = build_agent(config, EnvSpaces.of(factory))
    agent.load_state_dict(state["agent"])
    agent.greedy = True
    env = factory(False)
    obs, _ = env.reset(seed=seed)
    returns: list[float] = []
    episode_return = 0.0
    while len(returns) < episodes:
        batch = torch.as_tensor(np.asarray(obs))[None]
        with torch.no_grad():
            action = agent.step(batch, None, None, None).action
        obs, reward, terminated, truncated, _ = env.step(agent.env_action(action)[0])
        episode_return += float(reward)
        if terminated or truncated:
            returns.append(episode_return)
            episode_return = 0.0
            obs, _ = env.reset()
    env.close()
    return np.asarray(returns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (eval: 10000+)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    seed = EVAL_SEED_OFFSET + args.seed
    ours = evaluate_checkpoint(args.run_dir, args.episodes, greedy=True, seed=seed)
    theirs = one_env_greedy_returns(args.run_dir, args.episodes, seed)
    for name, returns in (("rlfw's evaluator", ours), ("one env, SB3's way", theirs)):
        error = returns.std(ddof=1) / np.sqrt(len(returns))
        print(f"{name}: {returns.mean():.1f} +- {error:.1f} over {len(returns)} episodes")


if __name__ == "__main__":
    main()
