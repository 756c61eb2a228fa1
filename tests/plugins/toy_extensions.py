"""A sampler and an algorithm registered from outside rlfw, the way a user adds their own
(``--plugin toy_extensions``). The test suite loads every module of this folder first, so
these two join the sampler-equivalence, fault and CLI tests without any list naming them.

``interleaved``: worker w steps env slots w, w + N, w + 2N... (a strided share of the
``[T, B]`` buffer) with its own agent copy. ``vpg``: vanilla policy gradient with a learned
baseline, one Adam step per batch.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from rlfw.algos.base import Algorithm
from rlfw.algos.pg.gae import generalized_advantages
from rlfw.algos.pg.spec import build_actor_critic
from rlfw.registry import register_algo, register_sampler
from rlfw.samplers.base import allocate_samples
from rlfw.samplers.machinery.collector import Collector
from rlfw.samplers.machinery.env_group import EnvGroup
from rlfw.samplers.machinery.parallel_base import ParallelSamplerBase
from rlfw.samplers.machinery.workers import serve, worker_setup


def _interleaved_worker(
    conn, env_factory, slots: range, seed: int, agent, buf, weights, cpu
) -> None:
    worker_setup(cpu)

    def make_handler():
        collector = Collector(
            EnvGroup(env_factory, slots, seed, train=True),
            agent,
            buf[:, slots.start :: slots.step],
            seed,
        )

        def handle(command: str, payload):
            if command == "sample":
                agent.load_state_dict(weights)
                return collector.collect()
            if command == "state":
                return collector.state_dict()
            if command == "load":
                return collector.load_state_dict(payload)
            raise ValueError(f"unknown command {command!r}")

        return handle, collector.group.close

    serve(conn, make_handler)


class InterleavedSampler(ParallelSamplerBase):
    """Worker w of N steps env slots w, w + N, ... with its own CPU copy of the agent."""

    def _setup(self) -> None:
        if self.env_width > 1:  # a strided share would split a many-agent env's columns
            raise ValueError("the interleaved sampler steps one-agent envs only")
        if self.n_workers > self.batch_B:
            raise ValueError(f"n_workers={self.n_workers} exceeds batch_B={self.batch_B}")
        self.slots = [range(w, self.batch_B, self.n_workers) for w in range(self.n_workers)]

    def _start(self, agent):
        samples = allocate_samples(
            agent,
            self.observation_space(),
            self.batch_T,
            self.batch_B,
            shared=True,
            debug=self.debug,
        )
        self.weights = {
            k: v.detach().clone().share_memory_() for k, v in agent.state_dict().items()
        }
        cpus = self.worker_cpus()
        worker_agent = copy.deepcopy(agent)
        self._start_workers(
            _interleaved_worker,
            [
                (self.env_factory, slots, self.seed, worker_agent, samples, self.weights, cpus[w])
                for w, slots in enumerate(self.slots)
            ],
        )
        return samples

    def _collect(self, itr: int):
        for key, value in self.agent.state_dict().items():
            self.weights[key].copy_(value)
        return self.samples, [ep for eps in self.pool.call("sample") for ep in eps]


@dataclass
class VPGConfig:
    """Vanilla policy gradient's settings."""

    learning_rate: float = 1e-2
    """Adam's step size."""
    gamma: float = 0.99
    """Discount factor."""
    value_coef: float = 0.5
    """Weight of the baseline's squared error."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus."""

    def validate(self) -> None:
        if not self.learning_rate > 0:
            raise ValueError(f"vpg.learning_rate must be > 0, got {self.learning_rate!r}")


class VPG(Algorithm):
    """REINFORCE with a learned baseline: Monte-Carlo-style returns (λ = 1), one step."""

    def __init__(self, config: VPGConfig | None = None):
        self.config = config or VPGConfig()
        self.config.validate()

    def initialize(self, agent, n_itr: int, seed: int = 0, replicas=None) -> None:
        self.agent = agent
        self.optimizer = torch.optim.Adam(agent.parameters(), lr=self.config.learning_rate)

    def optimize(self, samples, itr: int) -> dict[str, float]:
        c = self.config
        adv, ret = generalized_advantages(
            samples.reward,
            samples.agent_info.value,
            samples.terminated,
            samples.truncated,
            samples.bootstrap_value,
            c.gamma,
            1.0,
        )
        self.agent.train_mode()
        obs = self.agent.training_observations(samples).flatten(0, 1)
        logp, entropy, value = self.agent.evaluate_actions(obs, samples.action.flatten(0, 1))
        adv, ret = adv.flatten(), ret.flatten()
        policy_loss = -(adv * logp.flatten()).mean()
        value_loss = (ret - value.flatten()).pow(2).mean()
        loss = policy_loss + c.value_coef * value_loss - c.entropy_coef * entropy.mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"train/policy_loss": policy_loss.item(), "train/value_loss": value_loss.item()}

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])


def vpg_preset(env_id: str, family: str) -> dict:
    """Whole CartPole episodes per batch: 8 envs x 200 steps, lr 1e-2."""
    return {"batch_B": 8, "batch_T": 200, "hidden": (32,), "vpg": {"learning_rate": 1e-2}}


register_sampler("interleaved", InterleavedSampler, replace=True)
register_algo("vpg", VPG, VPGConfig, build_actor_critic, preset=vpg_preset, replace=True)
