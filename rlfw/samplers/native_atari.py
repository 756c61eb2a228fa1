"""NativeAtariSampler: ale-py's ``AtariVectorEnv`` (C++ threads do stepping and the Nature
preprocessing) driven like the GPU sampler: one batched forward pass per step in this
process, observations laid out exactly as on the Python Atari path (``[4, 84, 84]`` uint8).

Training-only parts are applied here so that episode statistics stay real: the native env
plays whole games with unclipped rewards; the sampler clips rewards into the buffer and
marks a lost life as ``terminated`` (episodic life) without resetting the game, while the
statistics add up the real score over all lives.
"""
from __future__ import annotations

import dataclasses
import re
import warnings

import numpy as np
import torch

from rlfw.agents.base import Agent
from rlfw.buffers import Samples
from rlfw.envs import EnvFactory, is_atari
from rlfw.samplers.base import SamplerBase, allocate_samples
from rlfw.samplers.bootstrap import bootstrap_batch_end, bootstrap_truncated
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.samplers.noise import SlotNoise
from rlfw.samplers.workers import default_workers, torch_threads
from rlfw.seeding import ACTION_NOISE, TRAIN_ENV, derive_seed


def rom_name(env_id: str) -> str:
    """'ALE/SpaceInvaders-v5' -> 'space_invaders' (ale-py's ROM naming)."""
    game = env_id.split("/", 1)[1].rsplit("-v", 1)[0]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", game).lower()


class NativeAtariSampler(SamplerBase):
    """All ``batch_B`` games in one ``AtariVectorEnv``; ``n_threads`` native threads step
    them (default: one per usable core)."""

    def __init__(self, env_factory: EnvFactory, batch_T: int, batch_B: int, seed: int = 0,
                 n_threads: int | None = None, n_eval_envs: int = 4, debug: bool = False,
                 n_eval_workers: int = 0):
        if not isinstance(env_factory, EnvFactory) or not is_atari(env_factory.env_id):
            got = getattr(env_factory, "env_id", env_factory)
            raise ValueError(f"the native sampler runs ALE games only ('ALE/<Game>-v5'), "
                             f"got {got!r}")
        super().__init__(env_factory, batch_T, batch_B, seed, n_eval_envs, debug, n_eval_workers)
        self.n_threads = n_threads
        self.envs = None
        # Native training presses FIRE only when a game starts (its episodic life is applied
        # here, without a reset), so evaluation must not press it after each lost life.
        self.eval_env_factory = dataclasses.replace(
            env_factory, atari=dataclasses.replace(env_factory.atari, episodic_life=False))

    def _make_envs(self):
        from ale_py.vector_env import AtariVectorEnv

        o = self.env_factory.atari
        return AtariVectorEnv(
            rom_name(self.env_factory.env_id), self.batch_B,
            num_threads=self.n_threads or default_workers(self.batch_B),
            autoreset_mode="SameStep", max_num_frames_per_episode=o.max_episode_frames,
            repeat_action_probability=o.sticky_action_prob, img_height=o.screen_size,
            img_width=o.screen_size, grayscale=True, stack_num=o.frame_stack,
            frameskip=o.frame_skip, maxpool=True, noop_max=o.noop_max,
            episodic_life=False, reward_clipping=False, use_fire_reset=True)

    def _start(self, agent: Agent) -> Samples:
        self.envs = self._make_envs()
        samples = allocate_samples(agent, self.envs.single_observation_space,
                                   self.batch_T, self.batch_B, debug=self.debug)
        self.noise = SlotNoise(self.seed, ACTION_NOISE, range(self.batch_B), agent.noise_shape,
                               agent.noise_kind)
        self._reset(round_index=0)
        return samples

    def _reset(self, round_index: int) -> None:
        seeds = np.array([derive_seed(self.seed, TRAIN_ENV, round_index, b)
                          for b in range(self.batch_B)], dtype=np.int64)
        obs, info = self.envs.reset(seed=seeds)
        self.obs = obs[np.argsort(info["env_id"])].copy()
        self.lives = np.asarray(info["lives"])[np.argsort(info["env_id"])].copy()
        self.ep_return = np.zeros(self.batch_B, np.float64)
        self.ep_length = np.zeros(self.batch_B, np.int64)

    def _collect(self, itr: int) -> tuple[Samples, list[EpisodeInfo]]:
        with torch_threads(1):
            return self._collect_batch()

    def _collect_batch(self) -> tuple[Samples, list[EpisodeInfo]]:
        buf, agent = self.samples, self.agent
        agent.sample_mode()
        buf.bootstrap_value.zero_()
        episodes: list[EpisodeInfo] = []
        pending = None
        noise = self.noise.draw_batch(self.batch_T)
        for t in range(self.batch_T):
            # Only the actions stand between two native steps; every buffer write and the
            # book-keeping of step t-1 overlap the stepping (recv hands out new arrays).
            obs = self.obs
            step = agent.step(torch.from_numpy(obs), noise[t])
            self.envs.send(agent.env_action(step.action).astype(np.int64))
            buf.observation[t] = torch.from_numpy(obs)
            buf.action[t] = step.action
            buf.agent_info[t] = step.info
            if pending is not None:
                self._record(t - 1, *pending, episodes)
            pending = self._receive()
        self._record(self.batch_T - 1, *pending, episodes)
        bootstrap_batch_end(buf, self.obs, agent)
        return buf, episodes

    def _receive(self):
        """Results of the step in flight, in slot order; ``self.obs`` becomes the next obs."""
        obs, reward, terminated, truncated, info = self.envs.recv()
        env_id = info["env_id"]
        if np.any(env_id[1:] < env_id[:-1]):  # only a permutation is worth a copy
            order = np.argsort(env_id)
            obs, reward, terminated, truncated = (obs[order], reward[order], terminated[order],
                                                  truncated[order])
            info = {"lives": info["lives"][order], "final_obs": info["final_obs"][order]}
        self.obs = obs
        return reward, terminated, truncated & ~terminated, info

    def _record(self, t: int, reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
                info: dict, episodes: list[EpisodeInfo]) -> None:
        buf, options = self.samples, self.env_factory.atari
        lives = np.asarray(info["lives"])
        game_over = terminated | truncated
        self.ep_return += reward
        self.ep_length += 1
        if game_over.any():
            for b in np.flatnonzero(game_over):
                episodes.append(EpisodeInfo(float(self.ep_return[b]), int(self.ep_length[b]),
                                            int(b)))
            self.ep_return[game_over] = 0.0
            self.ep_length[game_over] = 0
        ends = terminated
        if options.episodic_life:
            ends = terminated | ((lives < self.lives) & ~game_over)
        self.lives = lives
        train_reward = np.sign(reward) if options.clip_reward else reward
        buf.reward[t] = torch.from_numpy(train_reward.astype(np.float32))
        buf.terminated[t] = torch.from_numpy(ends)
        cut = truncated & ~ends
        buf.truncated[t] = torch.from_numpy(cut)
        if cut.any():  # ale-py reports final_obs only on steps where an episode ended
            idx = np.flatnonzero(cut)
            bootstrap_truncated(buf, t, idx, np.asarray(info["final_obs"])[idx], self.agent)

    def _state(self) -> dict:
        # The native emulators' states cannot be exported: a resumed run restarts games.
        return {"native": True, "noise": self.noise.state()}

    def _load_state(self, state: dict) -> None:
        warnings.warn("resuming with the native ALE sampler restarts every game (its "
                      "emulator state is not exportable): the run is not bitwise identical "
                      "to an uninterrupted one", stacklevel=2)
        self.noise.set_state(state["noise"])
        self._reset(round_index=1 + state["eval_calls"])

    def _stop(self) -> None:
        if self.envs is not None:
            self.envs.close()
            self.envs = None
