"""NativeAtariSampler: ale-py's ``AtariVectorEnv`` (C++ threads do stepping and the Nature
preprocessing) driven like the alternating sampler: the games are split into fixed groups,
each its own ``AtariVectorEnv``, and one batched forward pass per group and step runs in
this process while the other groups' games step; observations are laid out exactly as on
the Python Atari path (``[4, 84, 84]`` uint8).

Training-only parts are applied here so that episode statistics stay real: the native env
plays whole games with unclipped rewards; the sampler clips rewards into the buffer and
marks a lost life as ``terminated`` (episodic life) without resetting the game, while the
statistics add up the real score over all lives. That accounting runs once per batch over
``[T, B]`` arrays, so between two native steps the master only chooses actions and copies
rows.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from rlfw.agents.base import Agent, reset_states
from rlfw.buffers import Samples
from rlfw.buffers.tree import numpy_views, tree_assign
from rlfw.envs import EnvFactory, is_atari
from rlfw.samplers.base import SamplerBase, allocate_samples
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.samplers.machinery.bootstrap import bootstrap_batch_end, bootstrap_truncated
from rlfw.samplers.machinery.noise import SlotNoise
from rlfw.samplers.machinery.workers import DEFAULT_START_METHOD, default_workers, torch_threads
from rlfw.utils.seeding import ACTION_NOISE, TRAIN_ENV, derive_seed

if TYPE_CHECKING:
    from ale_py.vector_env import AtariVectorEnv


def rom_name(env_id: str) -> str:
    """'ALE/SpaceInvaders-v5' -> 'space_invaders' (ale-py's ROM naming)."""
    game = env_id.split("/", 1)[1].rsplit("-v", 1)[0]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", game).lower()


class _Group:
    """One ``AtariVectorEnv`` stepping the slots ``columns`` (a contiguous range)."""

    def __init__(self, envs: AtariVectorEnv, columns: slice):
        self.envs, self.columns = envs, columns
        self.obs: np.ndarray | None = None  # the observation the next action is chosen on

    def receive(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The step in flight, in slot order (reward, terminated, truncated, info); ``obs``
        becomes the next observation."""
        obs, reward, terminated, truncated, info = self.envs.recv()
        env_id = info["env_id"]
        if np.any(env_id[1:] < env_id[:-1]):  # only a permutation is worth a copy
            order = np.argsort(env_id)
            obs, reward, terminated, truncated = (
                obs[order],
                reward[order],
                terminated[order],
                truncated[order],
            )
            info = {k: v[order] for k, v in info.items()}
        self.obs = obs
        return reward, terminated, truncated, info


class NativeAtariSampler(SamplerBase):
    """All ``batch_B`` games in ``n_groups`` ``AtariVectorEnv`` s (default 2 where there are
    two threads: one group's forward pass overlaps the other's stepping); ``n_threads``
    native threads in all (default: one per usable core), split between the groups, at
    least one each. Samples depend on ``n_groups`` only through the rounding of the batched
    forward pass (its batch size). ``start_method`` starts its evaluation workers' processes
    (``n_eval_workers``); the games' threads are ale-py's."""

    env_factory: EnvFactory  # the constructor takes ALE games by name only

    def __init__(
        self,
        env_factory: EnvFactory,
        batch_T: int,
        batch_B: int,
        seed: int = 0,
        n_threads: int | None = None,
        n_eval_envs: int = 4,
        debug: bool = False,
        n_eval_workers: int = 0,
        n_groups: int | None = None,
        start_method: str = DEFAULT_START_METHOD,
    ):
        if not isinstance(env_factory, EnvFactory) or not is_atari(env_factory.env_id):
            got = getattr(env_factory, "env_id", env_factory)
            raise ValueError(
                f"the native sampler runs ALE games only ('ALE/<Game>-v5'), got {got!r}"
            )
        if n_groups is not None and not (isinstance(n_groups, int) and 1 <= n_groups <= batch_B):
            raise ValueError(
                f"n_groups must be an int from 1 to batch_B={batch_B}, got {n_groups!r}"
            )
        super().__init__(
            env_factory, batch_T, batch_B, seed, n_eval_envs, debug, n_eval_workers, start_method
        )
        self.n_threads = n_threads
        self.n_groups = n_groups
        self.groups: list[_Group] = []
        # Native training presses FIRE only when a game starts (its episodic life is applied
        # here, without a reset), so evaluation must not press it after each lost life.
        self.eval_env_factory = dataclasses.replace(
            env_factory, atari=dataclasses.replace(env_factory.atari, episodic_life=False)
        )

    def _make_envs(self, n_envs: int, n_threads: int) -> AtariVectorEnv:
        from ale_py.vector_env import AtariVectorEnv

        o = self.env_factory.atari
        return AtariVectorEnv(
            rom_name(self.env_factory.env_id),
            n_envs,
            num_threads=n_threads,
            autoreset_mode="SameStep",
            max_num_frames_per_episode=o.max_episode_frames,
            repeat_action_probability=o.sticky_action_prob,
            img_height=o.screen_size,
            img_width=o.screen_size,
            grayscale=True,
            stack_num=o.frame_stack,
            frameskip=o.frame_skip,
            maxpool=True,
            noop_max=o.noop_max,
            episodic_life=False,
            reward_clipping=False,
            use_fire_reset=True,
        )

    def _start(self, agent: Agent) -> Samples:
        threads = self.n_threads or default_workers(self.batch_B)
        n_groups = self.n_groups or min(2, self.batch_B, threads)
        for i, cols in enumerate(np.array_split(np.arange(self.batch_B), n_groups)):
            share = threads // n_groups + (i < threads % n_groups)
            self.groups.append(
                _Group(
                    self._make_envs(len(cols), max(1, share)),
                    slice(int(cols[0]), int(cols[-1]) + 1),
                )
            )
        samples = allocate_samples(
            agent,
            self.groups[0].envs.single_observation_space,
            self.batch_T,
            self.batch_B,
            debug=self.debug,
        )
        self._rows = numpy_views(samples)
        # What the native envs report each step, kept raw until the batch's accounting.
        shape = (self.batch_T, self.batch_B)
        self._env_reward = np.zeros(shape, np.float64)
        self._env_terminated = np.zeros(shape, bool)
        self._env_truncated = np.zeros(shape, bool)
        self._env_lives = np.zeros(shape, np.int64)
        self.noise = SlotNoise.for_agent(agent, self.seed, ACTION_NOISE, range(self.batch_B))
        self.slot_states = agent.initial_state(self.batch_B)
        self._reset(round_index=0)
        return samples

    def _reset(self, round_index: int) -> None:
        for group in self.groups:
            slots = range(group.columns.start, group.columns.stop)
            seeds = np.array(
                [derive_seed(self.seed, TRAIN_ENV, round_index, b) for b in slots], dtype=np.int64
            )
            obs, info = group.envs.reset(seed=seeds)
            order = np.argsort(info["env_id"])
            group.obs = obs[order].copy()
            self._env_lives[-1, group.columns] = np.asarray(info["lives"])[order]
        self.ep_return = np.zeros(self.batch_B, np.float64)
        self.ep_length = np.zeros(self.batch_B, np.int64)
        if self.slot_states is not None:  # every game starts afresh
            self.slot_states.zero_()

    def _collect(self, itr: int) -> tuple[Samples, list[EpisodeInfo]]:
        with torch_threads(1):
            return self._collect_batch()

    def _collect_batch(self) -> tuple[Samples, list[EpisodeInfo]]:
        buf, rows, agent = self.samples, self._rows, self.agent
        assert buf is not None and agent is not None  # running
        agent.sample_mode()
        buf.bootstrap_value.zero_()
        lives_before = self._env_lives[-1].copy()
        noise = self.noise.draw_batch(self.batch_T)
        for t in range(self.batch_T):
            for group in self.groups:
                cols = group.columns
                if t > 0:  # the group's step t-1 is in flight; the others keep stepping
                    self._store(t - 1, group)
                obs = group.obs
                states = None if self.slot_states is None else self.slot_states[cols]
                tree_assign(rows.agent_state, (t, cols), states)
                step = agent.step(torch.from_numpy(obs), noise[t, cols], None, states)
                if states is not None:
                    assert self.slot_states is not None and step.state is not None  # recurrent
                    self.slot_states[cols] = step.state
                group.envs.send(agent.env_action(step.action).astype(np.int64, copy=False))
                rows.observation[t, cols] = obs
                tree_assign(rows.action, (t, cols), step.action)
                tree_assign(rows.agent_info, (t, cols), step.info)
        for group in self.groups:
            self._store(self.batch_T - 1, group)
        episodes = self._account(lives_before)
        next_obs = np.concatenate([group.obs for group in self.groups])
        bootstrap_batch_end(buf, next_obs, agent, self.slot_states)
        return buf, episodes

    def _store(self, t: int, group: _Group) -> None:
        assert self.agent is not None and self.samples is not None  # running
        reward, terminated, truncated, info = group.receive()
        cols = group.columns
        lives_before = self._env_lives[t - 1, cols].copy()  # t = 0: the last batch's last
        self._env_reward[t, cols] = reward
        self._env_terminated[t, cols] = terminated
        truncated = truncated & ~terminated  # terminated wins: no bootstrap
        self._env_truncated[t, cols] = truncated
        self._env_lives[t, cols] = info["lives"]
        states = None if self.slot_states is None else self.slot_states[cols]
        if truncated.any():  # ale-py reports final_obs only on steps where an episode ended
            idx = np.flatnonzero(truncated)
            bootstrap_truncated(
                self.samples,
                t,
                cols.start + idx,
                np.asarray(info["final_obs"])[idx],
                self.agent,
                None if states is None else states[idx],
            )
        if states is not None:  # where the learner sees an episode end (as _account does)
            ends = terminated | truncated
            if self.env_factory.atari.episodic_life:
                ends |= np.asarray(info["lives"]) < lives_before
            reset_states(states, ends)

    def _account(self, lives_before: np.ndarray) -> list[EpisodeInfo]:
        """Whole-game statistics, episodic life and reward clipping for the batch just
        stepped, from the raw ``[T, B]`` arrays; returns the games that ended, in step then
        slot order."""
        rows, options = self._rows, self.env_factory.atari
        reward, terminated = self._env_reward, self._env_terminated
        truncated, lives = self._env_truncated, self._env_lives
        game_over = terminated | truncated
        episodes: list[EpisodeInfo] = []
        start = np.zeros(self.batch_B, np.int64)  # first step of each slot's open game
        for t, b in zip(*np.nonzero(game_over)):
            ret = self.ep_return[b] + reward[start[b] : t + 1, b].sum()
            episodes.append(
                EpisodeInfo(float(ret), int(self.ep_length[b] + t + 1 - start[b]), int(b))
            )
            self.ep_return[b], self.ep_length[b], start[b] = 0.0, 0, t + 1
        for b in range(self.batch_B):
            self.ep_return[b] += reward[start[b] :, b].sum()
        self.ep_length += self.batch_T - start
        ends = terminated
        if options.episodic_life:
            lives_prev = np.concatenate([lives_before[None], lives[:-1]])
            ends = terminated | ((lives < lives_prev) & ~game_over)
        rows.reward[:] = np.sign(reward) if options.clip_reward else reward
        rows.terminated[:] = ends
        rows.truncated[:] = truncated & ~ends
        return episodes

    def _state(self) -> dict[str, Any]:
        # The native emulators' states cannot be exported: a resumed run restarts games.
        return {"native": True, "noise": self.noise.state()}

    def _load_state(self, state: dict[str, Any]) -> None:
        warnings.warn(
            "resuming with the native ALE sampler restarts every game (its "
            "emulator state is not exportable): the run is not bitwise identical "
            "to an uninterrupted one",
            stacklevel=2,
        )
        self.noise.set_state(state["noise"])
        self._reset(round_index=1 + state["eval_calls"])

    def _stop(self) -> None:
        for group in self.groups:
            group.envs.close()
        self.groups = []
