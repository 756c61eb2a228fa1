"""Videos of an agent: episodes played on one rendering eval env, each streamed into
``FOLDER/<prefix>episode-<k>-return-<R>.mp4`` (the first also as a small GIF)."""

from __future__ import annotations

import dataclasses
import os
import re

import gymnasium as gym
import numpy as np

from rlfw.agents.base import Agent
from rlfw.envs import EnvFactory, is_atari
from rlfw.envs.recording import RecordFrames
from rlfw.logging.video import EpisodeVideo, imageio_module
from rlfw.samplers.machinery.evaluation import EvalLimits, Evaluator


class VideoSink:
    """Turns ``RecordFrames``' episodes into files; ``written`` lists them per episode."""

    def __init__(self, folder: str, fps: float, prefix: str = "", gif_first: bool = True):
        self.folder, self.fps, self.prefix, self.gif_first = folder, fps, prefix, gif_first
        self.video: EpisodeVideo | None = None
        self.written: list[list[str]] = []

    def start(self) -> None:
        self.video = EpisodeVideo(self.folder, self.fps, gif=self.gif_first and not self.written)

    def frame(self, rgb: np.ndarray) -> None:
        assert self.video is not None  # RecordFrames starts each episode first
        self.video.add(rgb)

    def end(self, episode_return: float, length: int, cut: bool = False) -> None:
        name = f"{self.prefix}episode-{len(self.written):02d}-return-{episode_return:.1f}" + (
            "-cut" if cut else ""
        )
        assert self.video is not None  # RecordFrames starts each episode first
        self.written.append(self.video.finish(re.sub(r"[^A-Za-z0-9_.+-]", "_", name)))
        self.video = None

    def abandon(self) -> None:
        if self.video is not None:
            self.video.discard()
            self.video = None


def frames_per_second(env_factory: EnvFactory) -> float:
    """The env's own render rate per agent step (Atari: 60 Hz over the frame skip)."""
    probe = env_factory(False)
    try:
        fps = float(probe.metadata.get("render_fps") or 30)
    finally:
        probe.close()
    return fps / env_factory.atari.frame_skip if is_atari(env_factory.env_id) else fps


def record_episodes(
    agent: Agent,
    env_factory: EnvFactory,
    folder: str,
    n_episodes: int,
    greedy: bool,
    seed: int,
    limits: EvalLimits = EvalLimits(),
    prefix: str = "",
) -> tuple[np.ndarray, list[list[str]]]:
    """Play ``n_episodes`` with ``agent`` on one rendering eval env (seeded as evaluation
    envs are) and write a video of each; returns their returns and the files per episode."""
    imageio_module()  # the install hint before anything is played
    if not isinstance(env_factory, EnvFactory):
        raise ValueError(
            f"videos need envs made by name (an EnvFactory), got {type(env_factory).__name__}"
        )
    # Headless rendering: pygame (classic control) otherwise probes for a display and audio.
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    rendering = dataclasses.replace(env_factory, render_mode="rgb_array")
    sink = VideoSink(folder, frames_per_second(env_factory), prefix)
    evaluator = Evaluator(lambda train: RecordFrames(rendering(train), sink), 1, seed)
    try:
        episodes = evaluator.run(agent, n_episodes, greedy=greedy, limits=limits)
    except gym.error.DependencyNotInstalled as err:
        raise ValueError(f"{env_factory.env_id} cannot render: {err}") from None
    finally:
        evaluator.close()  # ends a cut episode's video, drops one never played
    return np.array([e.ret for e in episodes]), sink.written
