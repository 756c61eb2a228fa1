"""Test doubles shipped with the package: envs whose every number is predictable."""

from __future__ import annotations

import os
import signal
from typing import Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np


class CountingEnv(gym.Env):
    """Observation ``[seed_tag, episode, t]`` (float32); reward ``t + 1`` on step ``t``.

    Episode ``k`` lasts ``lengths[k % len(lengths)]`` steps and then terminates when ``k`` is
    even, truncates when odd, so one run covers both kinds of episode end. ``seed_tag`` is
    the seed passed to the first ``reset`` modulo 997, so a test can see which slot is which.
    Actions are accepted and ignored, except that ``info['action_seen']`` echoes them.
    """

    metadata: dict[str, Any] = {}

    def __init__(self, lengths: tuple[int, ...] = (3, 5, 4), n_actions: int = 3):
        self.lengths = tuple(lengths)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(n_actions)
        self._tag = 0.0
        self._episode = -1
        self._t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self._tag, self._episode, self._t], dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._tag = float(seed % 997)
        self._episode += 1
        self._t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        reward = float(self._t + 1)
        self._t += 1
        length = self.lengths[self._episode % len(self.lengths)]
        ended = self._t >= length
        terminated = ended and self._episode % 2 == 0
        truncated = ended and self._episode % 2 == 1
        return self._obs(), reward, terminated, truncated, {"action_seen": action}


class RaisingEnv(CountingEnv):
    """A CountingEnv that raises ``RuntimeError`` on its ``raise_at``-th step (0-based)."""

    def __init__(self, raise_at: int = 5, **kwargs: Any):
        super().__init__(**kwargs)
        self.raise_at = raise_at
        self._steps = 0

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._steps == self.raise_at:
            raise RuntimeError(f"RaisingEnv: deliberate failure at step {self._steps}")
        self._steps += 1
        return super().step(action)


class SelfKillingEnv(CountingEnv):
    """A CountingEnv whose process SIGKILLs itself on its ``kill_at``-th step (a crashed
    worker: no Python exception, no cleanup), or in its first reset with
    ``kill_in_reset`` (a worker dying while it starts)."""

    def __init__(self, kill_at: int = 5, kill_in_reset: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.kill_at = kill_at
        self.kill_in_reset = kill_in_reset
        self._steps = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if self.kill_in_reset and in_sampler_worker():
            os.kill(os.getpid(), signal.SIGKILL)
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._steps == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        self._steps += 1
        return super().step(action)


def in_sampler_worker() -> bool:
    """True inside a sampler worker process (test envs must not kill the test itself)."""
    import multiprocessing

    return multiprocessing.current_process().name.startswith("rlfw-sampler-worker")


class KillOnceEnv(gym.Wrapper):
    """A real task (default CartPole) whose sampler worker SIGKILLs itself at the env's
    ``kill_at``-th step unless ``marker`` exists, creating it first: a run restarted from a
    checkpoint replays that step without dying, so restart-equals-uninterrupted is testable."""

    def __init__(self, marker: str, kill_at: int, env_id: str = "CartPole-v1"):
        super().__init__(gym.make(env_id))
        self.marker, self.kill_at = marker, kill_at
        self._steps = 0

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._steps == self.kill_at and in_sampler_worker() and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        self._steps += 1
        return self.env.step(action)


class NonFiniteRewardEnv(CountingEnv):
    """A CountingEnv whose reward is NaN on its ``nan_at``-th step (0-based)."""

    def __init__(self, nan_at: int = 5, **kwargs: Any):
        super().__init__(**kwargs)
        self.nan_at = nan_at
        self._steps = 0

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        reward = float("nan") if self._steps == self.nan_at else reward
        self._steps += 1
        return obs, reward, terminated, truncated, info


class ContinuousCountingEnv(CountingEnv):
    """CountingEnv with a 2-d Box action space, for Gaussian-policy code paths."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


class FrameCountingEnv(gym.Env):
    """2x2 uint8 frames whose every pixel is ``16 * (episode % 16) + t``, so a stack of
    frames tells exactly which episode and steps it came from. Episode ``k`` lasts
    ``lengths[k % len(lengths)]`` steps; even episodes terminate, odd ones truncate."""

    metadata: dict[str, Any] = {}

    def __init__(self, lengths: tuple[int, ...] = (5, 2, 7, 3)):
        self.lengths = tuple(lengths)
        self.observation_space = gym.spaces.Box(0, 255, (2, 2), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self._episode, self._t = -1, 0

    def _frame(self) -> np.ndarray:
        return np.full((2, 2), 16 * (self._episode % 16) + self._t, np.uint8)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._episode += 1
        self._t = 0
        return self._frame(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        ended = self._t >= self.lengths[self._episode % len(self.lengths)]
        odd = self._episode % 2 == 1
        return self._frame(), 0.0, ended and not odd, ended and odd, {}


def stacked_frame_counting_env(stack: int = 4, **kwargs: Any) -> gym.Env:
    """``FrameCountingEnv`` behind gymnasium's ``FrameStackObservation`` (reset padding),
    exactly as Atari frames are stacked."""
    return gym.wrappers.FrameStackObservation(FrameCountingEnv(**kwargs), stack)


class SleepyEnv(CountingEnv):
    """A ``CountingEnv`` whose every step costs ``step_s`` seconds of waiting (not CPU), so
    the best number of sampler workers is known: as many as there are envs."""

    def __init__(self, step_s: float = 0.004, **kwargs: Any):
        super().__init__(**kwargs)
        self.step_s = step_s

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        import time

        time.sleep(self.step_s)
        return super().step(action)


class CountMatchingEnv(CountingEnv):
    """A CountingEnv that rewards 1 when the action equals ``t % n_actions`` (the step
    within the episode) and 0 otherwise: an agent that must count the steps itself, in a
    recurrent state reset at every episode start, earns exactly the episode's length."""

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        n_actions = cast(gym.spaces.Discrete, self.action_space).n
        matched = int(action) == self._t % n_actions
        obs, _, terminated, truncated, info = super().step(action)
        return obs, float(matched), terminated, truncated, info


class NestedCountingEnv(CountingEnv):
    """``CountingEnv`` observing a nested Dict whose every leaf is exact and keeps its
    dtype: ``count`` (the float32 ``[seed_tag, episode, t]``), ``step`` (``Discrete``:
    ``t % 7``), ``grid`` (uint8 ``[2, 3, 3]``, every cell ``t``), ``flags`` (``MultiBinary``
    3: ``t``'s bits) and ``pair`` (a ``Tuple`` of ``MultiDiscrete [4, 5]`` holding
    ``(episode % 4, t % 5)`` and a bool ``Box`` ``[t is even]``)."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.observation_space = gym.spaces.Dict(
            {
                "count": gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
                "step": gym.spaces.Discrete(7),
                "grid": gym.spaces.Box(0, 255, (2, 3, 3), np.uint8),
                "flags": gym.spaces.MultiBinary(3),
                "pair": gym.spaces.Tuple(
                    (
                        gym.spaces.MultiDiscrete([4, 5]),
                        # gymnasium's annotations allow float and int Boxes; bool ones work
                        gym.spaces.Box(0, 1, (1,), np.bool_),  # type: ignore[arg-type]
                    )
                ),
            }
        )

    def _obs(self) -> dict[str, Any]:  # type: ignore[override]
        t = self._t
        return {
            "count": super()._obs(),
            "step": np.int64(t % 7),
            "grid": np.full((2, 3, 3), t, np.uint8),
            "flags": np.array([(t >> i) & 1 for i in range(3)], np.int8),
            "pair": (
                np.array([self._episode % 4, t % 5], np.int64),
                np.array([t % 2 == 0]),
            ),
        }


class TextLeafEnv(CountingEnv):
    """``CountingEnv`` observing ``{"count": [tag, episode, t], "mission": "count"}``: a
    gymnasium ``Text`` leaf (as MiniGrid's mission), which no fixed-shape buffer holds."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.observation_space = gym.spaces.Dict(
            {
                "count": gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
                "mission": gym.spaces.Text(max_length=16),
            }
        )

    def _obs(self) -> dict[str, Any]:  # type: ignore[override]
        return {"count": super()._obs(), "mission": "count"}


class GoalCountingEnv(gym.Env):
    """A goal-conditioned counter for HER: observations are a Dict of ``observation``
    ``[tag, episode, t]``, ``achieved_goal`` ``[1000 tag + 100 episode + t]`` (unique per
    slot, episode and step) and ``desired_goal`` ``[-1]`` (never achieved, so every success
    in a minibatch is a relabelled one); episodes are truncated after ``length`` steps;
    ``compute_reward`` is 0 where the goals match and -1 elsewhere, as Fetch's sparse one."""

    metadata: dict[str, Any] = {}

    def __init__(self, length: int = 4):
        self.length = length
        vector = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.observation_space = gym.spaces.Dict(
            {
                "achieved_goal": vector,
                "desired_goal": vector,
                "observation": gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
            }
        )
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self._tag, self._episode, self._t = 0.0, -1, 0

    def _obs(self) -> dict[str, np.ndarray]:
        achieved = 1000 * self._tag + 100 * self._episode + self._t
        return {
            "achieved_goal": np.array([achieved], np.float32),
            "desired_goal": np.array([-1.0], np.float32),
            "observation": np.array([self._tag, self._episode, self._t], np.float32),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._tag = float(seed % 997)
        self._episode += 1
        self._t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        self._t += 1
        obs = self._obs()
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], {}))
        return obs, reward, False, self._t >= self.length, {"is_success": 0.0}

    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: dict[str, Any]
    ) -> np.ndarray:
        distance: np.ndarray = np.abs(achieved_goal - desired_goal).sum(-1)
        return -(distance > 0).astype(np.float32)


class CountingAgentsGame:
    """A two-agent game in PettingZoo's Parallel API (duck-typed: no pettingzoo needed)
    whose every number is predictable, for many-agent columns.

    Agent ``i`` observes ``[tag + 1000 i, episode, t]`` and gets reward ``(i + 1)(t + 1)``
    on step ``t``. Episode ``k`` lasts ``lengths[k % len(lengths)]`` steps, then the agents
    still playing terminate (``k`` even) or truncate (``k`` odd); the second agent leaves
    (terminates) after ``second_leaves_after`` steps when the episode is longer, so one
    run covers agents that leave while others play on.
    """

    possible_agents = ["first", "second"]

    def __init__(self, lengths: tuple[int, ...] = (3, 5, 4), second_leaves_after: int = 2):
        self.lengths, self.leave = tuple(lengths), second_leaves_after
        self.agents: list[str] = []
        self._tag, self._episode, self._t = 0.0, -1, 0

    def observation_space(self, agent: str) -> gym.spaces.Box:
        return gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)

    def action_space(self, agent: str) -> gym.spaces.Discrete:
        return gym.spaces.Discrete(3)

    def _obs(self, agent: str) -> np.ndarray:
        tag = self._tag + 1000 * self.possible_agents.index(agent)
        return np.array([tag, self._episode, self._t], dtype=np.float32)

    def state(self) -> np.ndarray:
        return np.array([self._tag, self._episode, self._t], dtype=np.float32)

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        if seed is not None:
            self._tag = float(seed % 997)
        self._episode += 1
        self._t = 0
        self.agents = list(self.possible_agents)
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], ...]:
        assert set(actions) == set(self.agents), (actions, self.agents)
        rewards = {
            a: float((self.possible_agents.index(a) + 1) * (self._t + 1)) for a in self.agents
        }
        self._t += 1
        length = self.lengths[self._episode % len(self.lengths)]
        ended = self._t >= length
        terminated = {a: ended and self._episode % 2 == 0 for a in self.agents}
        truncated = {a: ended and self._episode % 2 == 1 for a in self.agents}
        if not ended and self._t == self.leave and "second" in self.agents:
            terminated["second"] = True
        observations = {a: self._obs(a) for a in self.agents}
        self.agents = [a for a in self.agents if not (terminated[a] or truncated[a])]
        return observations, rewards, terminated, truncated, {a: {} for a in actions}

    def close(self) -> None:
        pass


def counting_agents_env() -> gym.Env:
    """``CountingAgentsGame`` as rlfw columns (an ``EnvFactory`` entry)."""
    from rlfw.envs.multiagent import ParallelColumns

    return ParallelColumns(CountingAgentsGame, "counting agents")
