"""Nature-DQN Atari preprocessing assembled from gymnasium's wrappers.

gymnasium has no episodic-life or fire-on-reset wrapper, so those two live here; all the
rest (no-op starts, frame-skip with max-pool, 84x84 gray, frame stack) is gymnasium's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np

from rlfw.utils.checks import check_positive
from rlfw.utils.settings import Flag

if TYPE_CHECKING:
    from ale_py import AtariEnv

_Step = tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]  # what ``env.step`` returns


@dataclass(frozen=True)
class AtariOptions:
    """Preprocessing knobs for ``ALE/<Game>-v5`` ids (defaults: Nature DQN / PPO paper)."""

    frame_skip: int = 4
    """Emulator frames per agent step (the last two max-pooled)."""
    screen_size: int = 84
    """Side of the square grayscale observation."""
    frame_stack: int = 4
    """Frames stacked into one observation."""
    noop_max: int = 30
    """Random no-ops after each real reset (at most this many)."""
    sticky_action_prob: Annotated[float, Flag("--sticky-actions")] = 0.0
    """Chance the emulator repeats the previous action (ALE v5's default is 0.25; the
    Nature setup used none)."""
    episodic_life: bool = True
    """Training envs only: a lost life ends the training episode."""
    clip_reward: bool = True
    """Training envs only: rewards become their sign."""
    max_episode_frames: int = 108_000
    """Emulator frames after which an episode is cut (30 minutes of play, as ALE v5)."""

    def validate(self) -> None:
        """Each knob within what the preprocessing can do, the bad one named
        (``atari.<field>``, as ``--set`` spells it)."""
        check_positive(
            **{
                f"atari.{name}": getattr(self, name)
                for name in ("frame_skip", "screen_size", "frame_stack", "max_episode_frames")
            }
        )
        if (
            isinstance(self.noop_max, bool)
            or not isinstance(self.noop_max, int)
            or self.noop_max < 0
        ):
            raise ValueError(f"atari.noop_max must be an integer >= 0, got {self.noop_max!r}")
        if not 0.0 <= self.sticky_action_prob < 1.0:
            raise ValueError(
                f"atari.sticky_action_prob must be in [0, 1) (the chance an "
                f"action repeats the last one), got {self.sticky_action_prob!r}"
            )


def _ale_env(env: gym.Env) -> AtariEnv:
    """The ALE env under ``env``'s wrappers (every env ``make_atari`` wraps is one)."""
    return cast("AtariEnv", env.unwrapped)


class EpisodicLife(gym.Wrapper):
    """Ends the training episode when a life is lost; reset only restarts the game after a
    real game over, otherwise it takes one no-op step from where play stopped."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._lives = 0
        self._game_over = True

    def step(self, action: Any) -> _Step:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._game_over = terminated or truncated
        lives = _ale_env(self.env).ale.lives()
        if 0 < lives < self._lives:
            terminated = True
        self._lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        if self._game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # the no-op itself ended the game
                obs, info = self.env.reset(**kwargs)
        self._lives = _ale_env(self.env).ale.lives()
        self._game_over = False
        return obs, info


class FireReset(gym.Wrapper):
    """Presses FIRE after reset in games that stay frozen until it is pressed."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        meanings = _ale_env(env).get_action_meanings()
        self._fire = meanings.index("FIRE")
        # Breakout-style games need a second, different action before play starts.
        self._second = 2 if len(meanings) >= 3 else 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        for action in (self._fire, self._second):
            obs, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info


class FireAfterLifeLoss(gym.Wrapper):
    """Evaluation twin of ``EpisodicLife`` + ``FireReset``: in training a lost life ends the
    episode and the reset that follows plays a no-op, FIRE and a second action, so the
    agent never has to learn to press FIRE. Evaluation replays the same three steps after
    each lost life; otherwise a policy that never presses FIRE idles until the frame cap."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        meanings = _ale_env(env).get_action_meanings()
        self._restart = (0, meanings.index("FIRE"), 2 if len(meanings) >= 3 else 0)
        self._lives = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._lives = _ale_env(self.env).ale.lives()
        return obs, info

    def step(self, action: Any) -> _Step:
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = _ale_env(self.env).ale.lives()
        if lives < self._lives and not (terminated or truncated):
            for restart_action in self._restart:
                obs, more, terminated, truncated, info = self.env.step(restart_action)
                reward = float(reward) + float(more)  # AtariPreprocessing's: floats already
                if terminated or truncated:
                    break
        self._lives = _ale_env(self.env).ale.lives()
        return obs, reward, terminated, truncated, info


def sign_reward(reward: SupportsFloat) -> float:
    """Module-level (not a lambda) so wrapped envs pickle into checkpoints."""
    return float(np.sign(float(reward)))


def needs_fire(env: gym.Env) -> bool:
    return "FIRE" in _ale_env(env).get_action_meanings()


def make_atari(
    env_id: str, options: AtariOptions, train: bool, render_mode: str | None = None
) -> gym.Env:
    """Raw ALE env -> no-ops, skip+max-pool, resize, gray -> real-episode statistics ->
    (train) episodic life -> fire reset -> (eval) fire after a lost life -> (train) reward
    sign -> frame stack. ``render_mode='rgb_array'``: ``render()`` gives the full-colour
    screen (for videos)."""
    import ale_py

    gym.register_envs(ale_py)
    env = gym.make(
        env_id,
        frameskip=1,  # AtariPreprocessing does the skipping and the max-pool
        obs_type="grayscale",  # it reads gray frames itself; the base env's RGB copy is waste
        repeat_action_probability=options.sticky_action_prob,
        full_action_space=False,
        max_num_frames_per_episode=options.max_episode_frames,
        render_mode=render_mode,
    )
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=options.noop_max,
        frame_skip=options.frame_skip,
        screen_size=options.screen_size,
        terminal_on_life_loss=False,
        grayscale_obs=True,
        scale_obs=False,
    )
    # Below the life/clip wrappers, so statistics report whole games with unclipped scores.
    env = gym.wrappers.RecordEpisodeStatistics(env)
    if train and options.episodic_life:
        env = EpisodicLife(env)
    if needs_fire(env):
        env = FireReset(env)
        if not train and options.episodic_life:  # evaluation plays the game training plays
            env = FireAfterLifeLoss(env)
    if train and options.clip_reward:
        env = gym.wrappers.TransformReward(env, sign_reward)
    # FrameStackObservation copies this space's RNG (gymnasium's batch_space), creating it
    # from OS entropy when unseeded; nothing samples it, but checkpoints pickle it: seeded,
    # identical runs write identical env state.
    env.observation_space.seed(0)
    env = gym.wrappers.FrameStackObservation(env, options.frame_stack)
    return env
