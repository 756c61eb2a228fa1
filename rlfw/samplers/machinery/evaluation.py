"""Evaluation episodes on separate envs, shared by all samplers, bounded in time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import gymnasium as gym
import numpy as np

from rlfw.agents.base import Agent, reset_states
from rlfw.buffers.tree import Tree
from rlfw.envs.multiagent import factory_columns
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.samplers.machinery.env_group import EnvGroup
from rlfw.samplers.machinery.noise import SlotNoise
from rlfw.samplers.machinery.workers import DEFAULT_START_METHOD, torch_threads
from rlfw.utils.checks import check_positive
from rlfw.utils.seeding import EVAL_NOISE


@dataclass(frozen=True)
class EvalLimits:
    """Bounds on one evaluation, in agent steps. An episode that reaches
    ``max_episode_steps`` is cut there; when ``max_steps`` (all eval envs together) is spent,
    running episodes are cut and the rest are not played. Cut episodes come back with
    ``truncated=True`` so callers can count them instead of averaging them in silently."""

    max_episode_steps: int | None = None
    max_steps: int | None = None

    def validate(self) -> None:
        for name in ("max_episode_steps", "max_steps"):
            if getattr(self, name) is not None:
                check_positive(**{f"eval_{name}": getattr(self, name)})


class Evaluator:
    """Runs ``n_episodes`` on ``n_envs`` evaluation envs (no episodic life, no reward clip),
    in this process or, with ``n_workers``, stepped by that many worker processes.

    Episodes are split evenly over the envs up front, so short episodes are not
    over-represented; call ``k`` reseeds envs and noise from (seed, k), so evaluation never
    disturbs the training streams and is itself reproducible.
    """

    def __init__(
        self,
        env_factory: Callable[[bool], gym.Env],
        n_envs: int,
        seed: int,
        n_workers: int = 0,
        start_method: str = DEFAULT_START_METHOD,
    ):
        check_positive(n_eval_envs=n_envs)
        n_envs *= factory_columns(env_factory)  # a many-agent env's agents are columns
        if n_workers:  # envs in their own processes; the master only runs inference
            from rlfw.samplers.machinery.process_env_group import ProcessEnvGroup

            self.group: EnvGroup | ProcessEnvGroup = ProcessEnvGroup(
                env_factory, n_envs, seed, min(n_workers, n_envs), start_method=start_method
            )
        else:
            self.group = EnvGroup(env_factory, range(n_envs), seed, train=False)
        self.seed = seed

    def run(
        self,
        agent: Agent,
        n_episodes: int,
        greedy: bool = True,
        call_index: int = 0,
        limits: EvalLimits = EvalLimits(),
    ) -> list[EpisodeInfo]:
        check_positive(n_episodes=n_episodes)
        limits.validate()
        n_envs = len(self.group.slots) // self.group.width
        quota = np.array([n_episodes // n_envs + (i < n_episodes % n_envs) for i in range(n_envs)])
        cap = limits.max_episode_steps or np.iinfo(np.int64).max
        budget = limits.max_steps or np.iinfo(np.int64).max
        obs = self.group.reset(round_index=call_index)
        columns = len(self.group.slots)
        noise = SlotNoise.for_agent(
            agent, self.seed, EVAL_NOISE, [call_index * columns + i for i in range(columns)]
        )
        was_greedy = agent.greedy
        agent.greedy = greedy
        # One intra-op thread: a batch of a few observations gains nothing from more, and
        # idle OpenMP threads spin on the cores the (worker-stepped) eval envs need.
        with torch_threads(1):
            return self._play(agent, obs, noise, quota, cap, budget, was_greedy)

    def _play(
        self,
        agent: Agent,
        obs: Tree,
        noise: SlotNoise,
        quota: np.ndarray,
        cap: int,
        budget: int,
        was_greedy: bool,
    ) -> list[EpisodeInfo]:
        n_envs, width = len(quota), self.group.width
        done_count = np.zeros(n_envs, int)
        ep_return, ep_steps = np.zeros(n_envs), np.zeros(n_envs, int)
        episodes: list[EpisodeInfo] = []
        state = agent.initial_state(n_envs * width)  # evaluation's own, fresh each episode
        try:
            steps = 0
            while True:
                active = done_count < quota
                if not active.any():
                    break
                if steps >= budget:  # cut what is running; unplayed episodes stay unplayed
                    episodes += [
                        EpisodeInfo(float(ep_return[i]), int(ep_steps[i]), int(i), True)
                        for i in np.flatnonzero(active & (ep_steps > 0))
                    ]
                    break
                step = agent.step(obs, noise.draw(), None, state)
                state = step.state
                active_columns = np.repeat(active, width)
                result = self.group.step(agent.env_action(step.action), active_columns)
                if state is not None:
                    reset_states(state, active_columns & (result.terminated | result.truncated))
                steps += int(active.sum())
                # an env's return: its agents' rewards summed (one agent: its reward)
                ep_return[active] += result.reward.reshape(n_envs, width).sum(1)[active]
                ep_steps[active] += 1
                for ep in result.episodes:
                    env = ep.slot // width
                    if done_count[env] < quota[env]:
                        cut = bool(ep_steps[env] >= cap)
                        episodes.append(ep._replace(slot=env, truncated=cut))
                        done_count[env] += 1
                    ep_return[env], ep_steps[env] = 0.0, 0
                for i in np.flatnonzero(active & (ep_steps >= cap)):  # cut by the cap
                    episodes.append(
                        EpisodeInfo(float(ep_return[i]), int(ep_steps[i]), int(i), True)
                    )
                    done_count[i] += 1
                    ep_return[i], ep_steps[i] = 0.0, 0
                    self.group.reset_slot(int(i) * width)
                    if state is not None:
                        reset_states(state, np.arange(n_envs * width) // width == i)
                obs = self.group.result.next_obs
        finally:
            agent.greedy = was_greedy
        return episodes

    def close(self) -> None:
        self.group.close()


class EvaluationSeries:
    """The evaluations of one run: the ``Evaluator`` is built on first use (Atari eval
    workers cost nothing until asked for), and call k plays reseeded round k, so a resumed
    run evaluates as an uninterrupted one when ``calls`` is restored from its checkpoint."""

    def __init__(
        self,
        env_factory: Callable[[bool], gym.Env],
        n_envs: int,
        seed: int,
        n_workers: int = 0,
        start_method: str = DEFAULT_START_METHOD,
    ):
        self.env_factory, self.n_envs = env_factory, n_envs
        self.seed, self.n_workers, self.start_method = seed, n_workers, start_method
        self.calls = 0
        self._evaluator: Evaluator | None = None

    def run(
        self, agent: Agent, n_episodes: int, greedy: bool = True, limits: EvalLimits = EvalLimits()
    ) -> list[EpisodeInfo]:
        if self._evaluator is None:
            self._evaluator = Evaluator(
                self.env_factory, self.n_envs, self.seed, self.n_workers, self.start_method
            )
        episodes = self._evaluator.run(agent, n_episodes, greedy, self.calls, limits)
        self.calls += 1
        return episodes

    def close(self) -> None:
        """Stop the evaluation envs (and workers); the next ``run`` starts them again."""
        if self._evaluator is not None:
            self._evaluator.close()
            self._evaluator = None
