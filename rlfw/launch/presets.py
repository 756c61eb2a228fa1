"""A run's starting settings for (algorithm, env): the run length and evaluation cadence of
the env's family, then the algorithm's own tuned settings (``AlgoSpec.preset``)."""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym

from rlfw.envs import AtariOptions, env_family
from rlfw.envs.families import merge_settings
from rlfw.registry import ALGOS

__all__ = ["RUN_LENGTH", "env_family", "preset", "schedule_for"]

# Env steps a run of each family takes by default: classic control 120k; Box-action
# classic control 200k; MuJoCo 1M; MinAtar 1M (its paper ran 5M frames; 1M is where the
# curves have separated, and what 2 cores do in minutes); Atari 10M (the PPO and A2C
# papers' budget).
RUN_LENGTH = {
    "classic": 120_000,
    "continuous": 200_000,
    "mujoco": 1_000_000,
    "minatar": 1_000_000,
    "minigrid": 100_000,  # rl-baselines3-zoo's budget for DoorKey-5x5 and Empty-Random-5x5
    "robotics": 20_000,  # rl-baselines3-zoo's (SAC + HER) budget for FetchReach
    "atari": 10_000_000,
    # agent steps (every agent's step counts): MPE simple_spread's 3 agents x 25-step
    # episodes, ~13k team episodes
    "multiagent": 1_000_000,
}
# Where a classic-control env has no time limit of its own (CliffWalking-v1, Blackjack-v1:
# gymnasium registers none), an evaluation episode is cut at this many steps and counted in
# eval/episodes_cut: a greedy policy that walks in a loop would otherwise never end it.
UNLIMITED_EVAL_CAP = 1_000
# A many-agent family's batch: this many envs, each as many columns as it has agents.
MULTIAGENT_ENVS = 8
# How a family's envs are observed by every algorithm: MiniGrid's mission is text, which
# no fixed-shape buffer holds (its tasks of one mission need it not).
FAMILY_ENV_OPTIONS: dict[str, dict[str, Any]] = {"minigrid": {"drop_keys": ("mission",)}}


def schedule_for(n_steps: int) -> dict[str, Any]:
    """Run length and the evaluation/log cadence that goes with it."""
    return {
        "n_steps": n_steps,
        "eval_every": min(max(n_steps // 10, 1), 250_000),
        "log_every": min(max(n_steps // 20, 1), 100_000),
    }


def _family_schedule(family: str) -> dict[str, Any]:
    out = schedule_for(RUN_LENGTH[family])
    if family == "atari":
        # Evaluation as the literature does it: sampled actions (an algorithm's preset may
        # say greedy), episodes capped at 108k frames, each evaluation at 100k agent steps.
        out.update(
            eval_greedy=False,
            eval_max_steps=100_000,
            eval_max_episode_steps=AtariOptions().max_episode_frames // AtariOptions().frame_skip,
        )
    return out


def multiagent_batch(factory: Callable[..., gym.Env]) -> int:
    """A many-agent family's ``batch_B``: ``MULTIAGENT_ENVS`` envs of the factory's, each
    as many columns as it has agents (batch_B counts columns)."""
    from rlfw.envs.multiagent import factory_columns

    return MULTIAGENT_ENVS * factory_columns(factory)


def preset(algo: str, env_id: str) -> dict[str, Any]:
    """Tuned defaults for ``algo`` on ``env_id``; explicit user values override them. The
    family's schedule (``RUN_LENGTH``), then the algorithm's registered preset, whose
    ``schedule.n_steps`` (if it sets one) brings its own cadence."""
    family = env_family(env_id)
    tuned = ALGOS.get(algo).preset(env_id, family)
    schedule = dict(tuned.get("schedule", {}))
    if "n_steps" in schedule:
        schedule = {**schedule_for(schedule["n_steps"]), **schedule}
    family_settings: dict[str, Any] = {"schedule": {**_family_schedule(family), **schedule}}
    spec = gym.registry.get(env_id)
    if spec is not None and spec.max_episode_steps is None and family in ("classic", "continuous"):
        family_settings["schedule"].setdefault("eval_max_episode_steps", UNLIMITED_EVAL_CAP)
    if family == "multiagent":
        from rlfw.envs.factory import EnvFactory

        family_settings["batch_B"] = multiagent_batch(EnvFactory(env_id))
    if family in FAMILY_ENV_OPTIONS:
        family_settings["env_options"] = FAMILY_ENV_OPTIONS[family]
    return merge_settings(tuned, family_settings)
