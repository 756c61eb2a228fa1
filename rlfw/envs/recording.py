"""A wrapper that hands every rendered frame of every episode to a sink (a video writer)."""

from __future__ import annotations

from typing import Any, Protocol, SupportsFloat, cast

import gymnasium as gym
import numpy as np


class EpisodeSink(Protocol):
    def start(self) -> None: ...

    def frame(self, rgb: np.ndarray) -> None: ...

    def end(self, episode_return: float, length: int, cut: bool = False) -> None: ...

    def abandon(self) -> None: ...


class RecordFrames(gym.Wrapper):
    """Renders after ``reset`` and after each ``step`` (an episode of L steps gives L + 1
    frames), and tells ``sink`` where episodes start and end with their return. The env must
    be made with ``render_mode='rgb_array'``; Atari renders the full-colour screen, not the
    agent's 84x84 input. A reset (or close) during an episode ends it as cut (an evaluation
    limit stopped it); one that never took a step is abandoned."""

    def __init__(self, env: gym.Env, sink: EpisodeSink):
        super().__init__(env)
        if env.render_mode != "rgb_array":
            raise ValueError(
                f"RecordFrames needs an env made with render_mode='rgb_array', "
                f"got {env.render_mode!r}"
            )
        self.sink = sink
        self.open = False
        self.episode_return, self.length = 0.0, 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._end_open_episode()
        obs, info = self.env.reset(**kwargs)
        self.sink.start()
        self.open, self.episode_return, self.length = True, 0.0, 0
        # an rgb_array env (checked in ``__init__``) renders one array
        self.sink.frame(cast(np.ndarray, self.env.render()))
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.episode_return += float(reward)
        self.length += 1
        self.sink.frame(cast(np.ndarray, self.env.render()))
        if terminated or truncated:
            # the game's score where the statistics wrapper keeps it (Atari: whole games)
            episode = info.get("episode")
            score = float(np.asarray(episode["r"])) if episode is not None else self.episode_return
            self.open = False
            self.sink.end(score, self.length)
        return obs, reward, terminated, truncated, info

    def _end_open_episode(self) -> None:
        if self.open:
            if self.length:
                self.sink.end(self.episode_return, self.length, cut=True)
            else:
                self.sink.abandon()
            self.open = False

    def close(self) -> None:
        self._end_open_episode()
        super().close()
