"""ParallelGpuSampler and AlternatingSampler: workers only step envs; the master runs the
batched forward pass (on the agent's device: cuda where there is one) through a
shared-memory step buffer, with blocking semaphores per worker — no spin loops.

With two worker groups (alternating), env stepping of one group overlaps inference for the
other: after releasing group 0 the master already computes group 1's actions.
"""

from __future__ import annotations

from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, cast

import gymnasium as gym
import torch

from rlfw.agents.base import Agent, reset_states
from rlfw.buffers import Samples, allocate, tree_assign, tree_index, tree_map
from rlfw.buffers.tree import Tree
from rlfw.samplers.base import allocate_samples
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.samplers.machinery.bootstrap import bootstrap_batch_end, bootstrap_truncated
from rlfw.samplers.machinery.env_group import EnvGroup
from rlfw.samplers.machinery.noise import SlotNoise
from rlfw.samplers.machinery.parallel_base import ParallelSamplerBase
from rlfw.samplers.machinery.workers import (
    CLOSED,
    Handler,
    process_context,
    serve,
    split_slots,
    torch_threads,
    wait_for_master,
    worker_setup,
)
from rlfw.utils.seeding import ACTION_NOISE

if TYPE_CHECKING:
    from multiprocessing.synchronize import Semaphore


class StepBuffer(NamedTuple):
    """One env step for all B slots, in shared memory between master and workers."""

    observation: Any  # next observation (after same-step reset); a tree if nested
    action: torch.Tensor  # what env.step receives
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_observation: Any  # true last observation where truncated
    present: torch.Tensor  # each column's agent in its env at ``observation``

    # ``buf[b]`` indexes every leaf rather than picking a field; methods, as mypy reads any
    # assignment in a NamedTuple body as a field.
    def __getitem__(self, index: Any) -> Tree:
        return tree_index(self, index)

    def __setitem__(self, index: Any, value: Tree) -> None:
        tree_assign(self, index, value)


def _env_worker(
    conn: Connection,
    env_factory: Callable[[bool], gym.Env],
    slots: range,
    seed: int,
    step_buf: StepBuffer,
    act_ready: Semaphore,
    step_done: Semaphore,
    cpu: int | None,
) -> None:
    worker_setup(cpu)

    def make_handler() -> tuple[Handler, Callable[[], None]]:
        group = EnvGroup(env_factory, slots, seed, train=True)
        # a cast: mypy types slicing a NamedTuple as a plain tuple's slice
        mine = cast(StepBuffer, step_buf[slots.start : slots.stop])
        tree_assign(mine.observation, slice(None), group.reset())
        mine.present[:] = torch.from_numpy(group.result.present)

        def handle(command: str, payload: Any) -> Any:
            if command == "steps":
                episodes: list[EpisodeInfo] = []
                for _ in range(payload):
                    if not wait_for_master(act_ready, conn):
                        return CLOSED
                    result = group.step(mine.action.numpy())
                    mine.reward[:] = torch.from_numpy(result.reward)
                    mine.terminated[:] = torch.from_numpy(result.terminated)
                    mine.truncated[:] = torch.from_numpy(result.truncated)
                    for i, final in result.final_obs.items():
                        tree_assign(mine.final_observation, i, final)
                    tree_assign(mine.observation, slice(None), result.next_obs)
                    mine.present[:] = torch.from_numpy(result.present)
                    episodes.extend(result.episodes)
                    step_done.release()
                return episodes
            if command == "state":
                return group.state_dict()
            if command == "load":
                group.load_state_dict(payload)
                tree_assign(mine.observation, slice(None), group.result.next_obs)
                mine.present[:] = torch.from_numpy(group.result.present)
                return None
            raise ValueError(f"unknown command {command!r}")

        return handle, group.close

    serve(conn, make_handler)


class ParallelGpuSampler(ParallelSamplerBase):
    """Env-stepping workers plus batched master-side inference (``n_groups=1``)."""

    n_groups = 1
    sees_whole_rows = True

    def _setup(self) -> None:
        if self.n_workers % self.n_groups:
            raise ValueError(
                f"n_workers={self.n_workers} must be a multiple of {self.n_groups} "
                f"for {type(self).__name__}"
            )
        self.worker_slots = split_slots(self.batch_B, self.n_workers, self.env_width)
        per_group = self.n_workers // self.n_groups
        self.groups = [range(w * per_group, (w + 1) * per_group) for w in range(self.n_groups)]
        self.act_ready: list[Semaphore] = []
        self.step_done: list[Semaphore] = []

    def _group_slots(self, g: int) -> slice:
        workers = self.groups[g]
        return slice(self.worker_slots[workers[0]].start, self.worker_slots[workers[-1]].stop)

    def _start(self, agent: Agent) -> Samples:
        obs_space = self.observation_space()
        samples = allocate_samples(
            agent, obs_space, self.batch_T, self.batch_B, debug=self.debug, valid=self.env_width > 1
        )
        example_action = agent.env_action(samples.action[0, :1])[0]
        obs = tree_map(torch.zeros_like, tree_index(samples.observation, (0, 0)))
        example = StepBuffer(
            obs,
            torch.as_tensor(example_action),
            torch.zeros(()),
            torch.zeros((), dtype=torch.bool),
            torch.zeros((), dtype=torch.bool),
            obs,
            torch.ones((), dtype=torch.bool),
        )
        self.step_buf: StepBuffer = allocate(example, (self.batch_B,), shared=True)
        self.noise = [
            SlotNoise.for_agent(
                agent, self.seed, ACTION_NOISE, range(self.batch_B)[self._group_slots(g)]
            )
            for g in range(self.n_groups)
        ]
        self.slot_states = agent.initial_state(self.batch_B)
        ctx = process_context(self.start_method)
        n = len(self.worker_slots)
        self.act_ready = [ctx.Semaphore(0) for _ in range(n)]
        self.step_done = [ctx.Semaphore(0) for _ in range(n)]
        cpus = self.worker_cpus()
        args = [
            (
                self.env_factory,
                slots,
                self.seed,
                self.step_buf,
                self.act_ready[w],
                self.step_done[w],
                cpus[w],
            )
            for w, slots in enumerate(self.worker_slots)
        ]
        self._start_workers(_env_worker, args)
        return samples

    def _collect(self, itr: int) -> tuple[Samples, list[EpisodeInfo]]:
        with torch_threads(1):
            return self._collect_batch()

    def _collect_batch(self) -> tuple[Samples, list[EpisodeInfo]]:
        assert self.agent is not None and self.samples is not None and self.pool is not None
        self.agent.sample_mode()
        self.samples.bootstrap_value.zero_()
        T = self.batch_T
        self.pool.send("steps", [T] * len(self.pool))
        for t in range(T):
            for g in range(self.n_groups):
                if t > 0:
                    self._finish_step(t - 1, g)
                self._act(t, g)
        for g in range(self.n_groups):
            self._finish_step(T - 1, g)
        episodes = [ep for w in range(len(self.pool)) for ep in self.pool.receive(w)]
        bootstrap_batch_end(self.samples, self.step_buf.observation, self.agent, self.slot_states)
        return self.samples, episodes

    def _act(self, t: int, g: int) -> None:
        """Inference for group g at step t, then let its workers step."""
        assert self.agent is not None and self.samples is not None  # running
        sl = self._group_slots(g)
        buf = self.samples
        observation = tree_index(self.step_buf.observation, sl)
        tree_assign(buf.observation, (t, sl), observation)
        if buf.valid is not None:
            buf.valid[t, sl] = self.step_buf.present[sl]
        states = None if self.slot_states is None else self.slot_states[sl]
        if states is not None:
            assert buf.agent_state is not None  # allocated for a recurrent agent
            buf.agent_state[t, sl] = states.cpu()
        observation = tree_index(buf.observation, (t, sl))
        self.agent.observe(observation)  # the whole row: one group only
        step = self.agent.step(observation, self.noise[g].draw(), range(self.batch_B)[sl], states)
        if states is not None:
            assert self.slot_states is not None and step.state is not None  # recurrent agent
            self.slot_states[sl] = step.state
        action = step.action.cpu()
        buf.action[t, sl] = action
        tree_assign(buf.agent_info, (t, sl), tree_map(torch.Tensor.cpu, step.info))
        self.step_buf.action[sl] = torch.as_tensor(self.agent.env_action(action))
        for w in self.groups[g]:
            self.act_ready[w].release()

    def _finish_step(self, t: int, g: int) -> None:
        """Wait for group g's workers, then copy their step results into the batch."""
        assert self.agent is not None and self.samples is not None and self.pool is not None
        for w in self.groups[g]:
            self.pool.wait(self.step_done[w])
        sl = self._group_slots(g)
        buf, step = self.samples, self.step_buf
        buf.reward[t, sl] = step.reward[sl]
        buf.terminated[t, sl] = step.terminated[sl]
        buf.truncated[t, sl] = step.truncated[sl]
        truncated = torch.nonzero(step.truncated[sl]).flatten() + sl.start
        states = self.slot_states
        if len(truncated):  # per env step: skip the gather and the forward pass when none
            bootstrap_truncated(
                buf,
                t,
                truncated,
                tree_index(step.final_observation, truncated),
                self.agent,
                None if states is None else states[truncated],
            )
        if states is not None:
            reset_states(states[sl], step.terminated[sl] | step.truncated[sl])

    def _release(self) -> None:
        # Under spawn, semaphores are named in /dev/shm until their last reference is gone.
        self.act_ready, self.step_done = [], []


class AlternatingSampler(ParallelGpuSampler):
    """Two worker groups: while one group steps its envs, the master runs inference for the
    other (rlpyt's alternating GPU sampler). Needs an even number of workers, at least 2."""

    n_groups = 2
    sees_whole_rows = False  # a group acts before the other group's row has arrived
