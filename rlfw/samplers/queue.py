"""QueueSampler (GA3C): actor processes post inference requests to one queue; a predictor in
the master batches whatever is waiting, runs one forward pass and routes each action back.

Unlike the gpu sampler's lockstep (every worker waits for one forward pass over all B
slots), an actor here is served as soon as a predictor pass picks up its request, so fast
actors are not held back by slow ones. Observations, actions and step results travel
through the shared ``[T, B]`` buffer; the queue carries only ``(actor, t)``.

Reproducibility: the samples equal the serial sampler's bit for bit, whatever the timing.
Each slot draws its action noise from its own stream, one draw per step, whichever pass
served it; and every pass runs the model over all B rows, a request's observations in its
own slots' rows, so no row's result depends on which requests happened to share the pass
(GEMM kernels round differently for different batch sizes, not for different neighbours).
What is not reproducible is only how requests were grouped (``batch_sizes``): timing.
The price is a full-width forward pass per predictor batch; GA3C's gain, serving an actor
as soon as it is ready instead of in lockstep with the slowest, is kept.
"""

from __future__ import annotations

import queue as queue_module
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Callable, cast

import gymnasium as gym
import numpy as np
import torch

from rlfw.agents.base import Agent, reset_states
from rlfw.buffers import Samples, tree_assign, tree_index, tree_map
from rlfw.buffers.tree import Tree, tree_stack
from rlfw.samplers.base import allocate_samples
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.samplers.machinery.bootstrap import bootstrap_batch_end, bootstrap_truncated
from rlfw.samplers.machinery.env_group import EnvGroup
from rlfw.samplers.machinery.noise import SlotNoise
from rlfw.samplers.machinery.parallel_base import ParallelSamplerBase
from rlfw.samplers.machinery.workers import (
    CLOSED,
    POLL_S,
    Handler,
    process_context,
    serve,
    share_memory,
    split_slots,
    torch_threads,
    wait_for_master,
    worker_setup,
)
from rlfw.utils.seeding import ACTION_NOISE

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Semaphore


def _actor(
    conn: Connection,
    actor: int,
    env_factory: Callable[[bool], gym.Env],
    slots: range,
    seed: int,
    buf: Samples,
    env_action: torch.Tensor,
    next_obs: Tree,
    requests: Queue[tuple[int, int]],
    action_ready: Semaphore,
    cpu: int | None,
) -> None:
    worker_setup(cpu)

    def make_handler() -> tuple[Handler, Callable[[], None]]:
        group = EnvGroup(env_factory, slots, seed, train=True)
        group.reset()
        # a cast: mypy types indexing a NamedTuple as picking one of its fields
        mine = cast(Samples, buf[:, slots.start : slots.stop])
        actions = env_action[slots.start : slots.stop]

        def handle(command: str, payload: Any) -> Any:
            if command == "sample":
                episodes: list[EpisodeInfo] = []
                finals: dict[tuple[int, int], np.ndarray] = {}  # (t, slot) -> final obs
                for t in range(payload):
                    tree_assign(mine.observation, t, group.result.next_obs)
                    if mine.valid is not None:
                        mine.valid[t] = torch.from_numpy(group.result.present)
                    requests.put((actor, t))
                    if not wait_for_master(action_ready, conn):
                        return CLOSED
                    result = group.step(actions.numpy())
                    mine.reward[t] = torch.from_numpy(result.reward)
                    mine.terminated[t] = torch.from_numpy(result.terminated)
                    mine.truncated[t] = torch.from_numpy(result.truncated)
                    for i, final in result.final_obs.items():
                        finals[(t, slots.start + i)] = final
                    episodes.extend(result.episodes)
                tree_assign(next_obs, slice(slots.start, slots.stop), group.result.next_obs)
                return episodes, finals
            if command == "state":
                return group.state_dict()
            if command == "load":
                return group.load_state_dict(payload)
            raise ValueError(f"unknown command {command!r}")

        return handle, group.close

    serve(conn, make_handler)


class QueueSampler(ParallelSamplerBase):
    """GA3C's actors and predictor over the common ``[T, B]`` buffer.

    ``n_workers`` actor processes each step a contiguous slice of the B env slots; the
    predictor serves at most ``max_batch`` env slots per forward pass (default: all B),
    waiting up to ``batch_wait_s`` for more requests after the first one (0: take only
    what is already queued)."""

    def __init__(
        self,
        *args: Any,
        max_batch: int | None = None,
        batch_wait_s: float = 0.0,
        **kwargs: Any,
    ):
        """``ParallelSamplerBase``'s arguments, plus the predictor's ``max_batch`` (default
        every env) and ``batch_wait_s``."""
        super().__init__(*args, **kwargs)
        self.slots = split_slots(self.batch_B, self.n_workers, self.env_width)
        self.widest = max(len(s) for s in self.slots)  # envs of the largest actor
        self.max_batch = self.batch_B if max_batch is None else max_batch
        if self.max_batch < self.widest:
            raise ValueError(
                f"max_batch={self.max_batch} is smaller than one actor's "
                f"{self.widest} envs; allowed: >= that"
            )
        if batch_wait_s < 0:
            raise ValueError(f"batch_wait_s must be >= 0, got {batch_wait_s}")
        self.batch_wait_s = batch_wait_s
        self.action_ready: list[Semaphore] = []
        self.requests: Queue[tuple[int, int]] | None = None
        self.batch_sizes: list[int] = []  # slots per predictor pass, last batch (a statistic)

    def _start(self, agent: Agent) -> Samples:
        obs_space = self.observation_space()
        samples = allocate_samples(
            agent,
            obs_space,
            self.batch_T,
            self.batch_B,
            shared=True,
            debug=self.debug,
            valid=self.env_width > 1,
        )
        example_action = torch.as_tensor(agent.env_action(samples.action[0, :1]))[0]
        self.env_action = share_memory(
            torch.zeros((self.batch_B,) + tuple(example_action.shape), dtype=example_action.dtype)
        )
        first_row = tree_index(samples.observation, 0)
        self.next_obs = tree_map(lambda x: share_memory(torch.zeros_like(x)), first_row)
        self.noise = [
            SlotNoise.for_agent(agent, self.seed, ACTION_NOISE, slots) for slots in self.slots
        ]
        self.predict_obs = tree_map(torch.zeros_like, first_row)
        self.predict_noise = np.zeros((self.batch_B,) + tuple(agent.noise_shape), np.float32)
        self.all_slots = range(self.batch_B)
        self.slot_states = agent.initial_state(self.batch_B)
        self.final_states: dict[tuple[int, int], torch.Tensor] = {}  # (t, slot), truncated
        ctx = process_context(self.start_method)
        self.requests = ctx.Queue()
        self.action_ready = [ctx.Semaphore(0) for _ in self.slots]
        cpus = self.worker_cpus()
        args = [
            (
                w,
                self.env_factory,
                slots,
                self.seed,
                samples,
                self.env_action,
                self.next_obs,
                self.requests,
                self.action_ready[w],
                cpus[w],
            )
            for w, slots in enumerate(self.slots)
        ]
        self._start_workers(_actor, args)
        return samples

    def _collect(self, itr: int) -> tuple[Samples, list[EpisodeInfo]]:
        assert self.agent is not None and self.samples is not None and self.pool is not None
        with torch_threads(1):
            self.agent.sample_mode()
            self.samples.bootstrap_value.zero_()
            self.pool.send("sample", [self.batch_T] * len(self.pool))
            waiting = self.batch_T * len(self.slots)
            self.batch_sizes = []
            while waiting:
                waiting -= self._predict(self._next_requests())
            results = [self.pool.receive(w) for w in range(len(self.pool))]
            episodes = [ep for eps, _ in results for ep in eps]
            self._bootstrap_truncated({k: v for _, finals in results for k, v in finals.items()})
            bootstrap_batch_end(self.samples, self.next_obs, self.agent, self.slot_states)
            reset_states(self.slot_states, self.samples.done[-1])
        return self.samples, episodes

    def _next_requests(self) -> list[tuple[int, int]]:
        """Block for one request (checking the actors are alive), then take more, up to
        ``max_batch`` env slots."""
        assert self.requests is not None and self.pool is not None  # running
        while True:
            try:
                batch = [self.requests.get(timeout=POLL_S)]
                break
            except queue_module.Empty:
                pass
            # outside the except: a WorkerError chained to Empty would keep the queue (and
            # its named semaphores) alive through the traceback
            self.pool.check_alive()
        size = len(self.slots[batch[0][0]])
        while True:
            try:
                actor, t = (
                    self.requests.get(timeout=self.batch_wait_s)
                    if self.batch_wait_s
                    else self.requests.get_nowait()
                )
            except queue_module.Empty:
                return batch
            batch.append((actor, t))
            size += len(self.slots[actor])
            if size + self.widest > self.max_batch:
                return batch

    def _predict(self, requests: list[tuple[int, int]]) -> int:
        """One forward pass serving every requesting actor's envs; then release them.

        The pass always covers all B rows, each request's observations in its own slots'
        rows (the rest are left as they were): a row's result then never depends on which
        requests shared the pass, so the samples equal the serial sampler's bit for bit."""
        assert self.agent is not None and self.samples is not None  # running
        buf, obs, noise = self.samples, self.predict_obs, self.predict_noise
        states = self.slot_states
        for a, t in requests:
            part = self.slots[a]
            rows = slice(part.start, part.stop)
            tree_assign(obs, rows, tree_index(buf.observation, (t, rows)))
            noise[part.start : part.stop] = self.noise[a].draw()
            if states is not None:
                self._start_step_states(t, slice(part.start, part.stop))
        step = self.agent.step(obs, noise, self.all_slots, states)
        if states is not None:
            assert step.state is not None  # a recurrent agent's step returns its state
            for a, _ in requests:
                rows = slice(self.slots[a].start, self.slots[a].stop)
                states[rows] = step.state[rows]
        action, info = step.action.cpu(), tree_map(torch.Tensor.cpu, step.info)
        env_action = torch.as_tensor(self.agent.env_action(action))
        served = 0
        for a, t in requests:
            part = self.slots[a]
            rows = slice(part.start, part.stop)
            buf.action[t, rows] = action[rows]
            tree_assign(buf.agent_info, (t, rows), tree_map(lambda x: x[rows], info))
            self.env_action[rows] = env_action[rows]
            self.action_ready[a].release()
            served += len(part)
        self.batch_sizes.append(served)
        return len(requests)

    def _start_step_states(self, t: int, rows: slice) -> None:
        """Before step ``t`` of ``rows``: keep the states of slots truncated at ``t - 1``
        (their bootstrap value needs them, after the batch), zero those whose episode
        ended there, and record the states step ``t`` starts from."""
        buf, states = self.samples, self.slot_states
        # called for a recurrent agent only, whose buffer keeps its states
        assert buf is not None and states is not None and buf.agent_state is not None
        if t > 0:
            for i in torch.nonzero(buf.truncated[t - 1, rows]).flatten().tolist():
                self.final_states[(t - 1, rows.start + i)] = states[rows.start + i].clone()
            reset_states(states[rows], buf.terminated[t - 1, rows] | buf.truncated[t - 1, rows])
        buf.agent_state[t, rows] = states[rows].cpu()

    def _bootstrap_truncated(self, finals: dict[tuple[int, int], np.ndarray]) -> None:
        assert self.agent is not None and self.samples is not None  # running
        last = self.batch_T - 1
        for t in sorted({t for t, _ in finals}):
            slots = sorted(b for tt, b in finals if tt == t)
            states = None
            if self.slot_states is not None:  # at the last step: still the slot's own
                states = torch.stack(
                    [
                        self.slot_states[b] if t == last else self.final_states.pop((t, b))
                        for b in slots
                    ]
                )
            bootstrap_truncated(
                self.samples,
                t,
                slots,
                tree_stack([finals[(t, b)] for b in slots]),
                self.agent,
                states,
            )

    def _release(self) -> None:
        if self.requests is not None:
            self.requests.close()
            self.requests.join_thread()
            self.requests = None
        self.action_ready = []  # named semaphores live in /dev/shm until unreferenced
