"""PQN (Gallici et al. 2024, *Simplifying Deep Temporal Difference Learning*): Q-learning on
the sampler's on-policy ``[T, B]`` batches, with no replay and no target network.

Each batch's Q(λ) targets are built from the max-Q values the sampler recorded as it acted
(``QInfo``: the network that sampled is the one that learns) and from the batch's
bootstrap values; ``epochs`` passes of shuffled minibatches then regress Q(s_t, a_t) on
them. What keeps this stable without a target network is the LayerNorm in the Q-network
(``layer_norm``) and the many envs that decorrelate a batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, cast

import torch

from rlfw.agents.base import Agent
from rlfw.agents.dqn_agent import DqnAgent
from rlfw.algos.base import Algorithm
from rlfw.algos.optim import (
    OPTIMIZERS,
    Replicas,
    flat_optimizer,
    gradient_step,
    gradient_sync,
    linear_schedule,
    set_lr,
)
from rlfw.buffers import QInfo, Samples, tree_index, tree_map, tree_take
from rlfw.buffers.tree import Tree
from rlfw.utils.checks import check_config
from rlfw.utils.settings import Flag

STATS = ("loss", "q", "target")


@dataclass
class PQNConfig:
    """PQN hyper-parameters (defaults: CleanRL's pqn.py)."""

    learning_rate: Annotated[float, Flag("--lr")] = 2.5e-4
    """The optimizer's step size."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over the run."""
    optimizer: str = "radam"
    """'radam' (the paper's and CleanRL's), 'adam' or 'rmsprop'."""
    optimizer_eps: float = 1e-8
    """The optimizer's epsilon."""
    gamma: float = 0.99
    """Discount factor."""
    lam: float = 0.65
    """Q(λ)'s λ: 0 gives one-step targets, 1 Monte Carlo returns bootstrapped where an
    episode is cut (a truncation, the batch's end)."""
    epochs: int = 4
    """Passes over each batch."""
    minibatch_size: int = 128
    """Env steps per minibatch (an epoch's last may be smaller), as ppo's; CleanRL's
    num_minibatches is batch_T x batch_B / minibatch_size."""
    max_grad_norm: float | None = 10.0
    """Clip the gradient's global norm to this (none: no clipping)."""
    layer_norm: bool = True
    """A LayerNorm before each hidden ReLU of the Q-network (the paper's; off: its
    ablation)."""
    epsilon_start: float = 1.0
    """ε-greedy exploration: ε at the start."""
    epsilon_final: float = 0.05
    """ε-greedy exploration: ε after its decay."""
    exploration_fraction: float = 0.5
    """Fraction of the run over which ε decays linearly (batch by batch)."""
    eval_epsilon: float = 0.0
    """ε of evaluation episodes played with sampled actions (the Atari preset: 0.05)."""

    def validate(self) -> None:
        unit = "must be in [0, 1]"
        check_config(
            "PQNConfig",
            learning_rate=(self.learning_rate, self.learning_rate > 0, "must be > 0"),
            optimizer=(self.optimizer, self.optimizer in OPTIMIZERS, f"one of {OPTIMIZERS}"),
            optimizer_eps=(self.optimizer_eps, self.optimizer_eps > 0, "must be > 0"),
            gamma=(self.gamma, 0 <= self.gamma <= 1, unit),
            lam=(self.lam, 0 <= self.lam <= 1, unit),
            epochs=(
                self.epochs,
                isinstance(self.epochs, int) and self.epochs > 0,
                "must be a positive int",
            ),
            minibatch_size=(
                self.minibatch_size,
                isinstance(self.minibatch_size, int) and self.minibatch_size > 0,
                "must be a positive int",
            ),
            max_grad_norm=(
                self.max_grad_norm,
                self.max_grad_norm is None or self.max_grad_norm > 0,
                "None or > 0",
            ),
            epsilon_start=(self.epsilon_start, 0 <= self.epsilon_start <= 1, unit),
            epsilon_final=(self.epsilon_final, 0 <= self.epsilon_final <= 1, unit),
            exploration_fraction=(
                self.exploration_fraction,
                0 <= self.exploration_fraction <= 1,
                unit,
            ),
            eval_epsilon=(self.eval_epsilon, 0 <= self.eval_epsilon <= 1, unit),
        )


def q_lambda_targets(
    reward: torch.Tensor,
    max_q: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    bootstrap_value: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Peng's Q(λ) returns ``G``, ``[T, B]``, of a batch (the targets of PQN):

        G_t = r_t + γ [(1 - λ) M_{t+1} + λ G_{t+1}]   while the episode goes on in the batch
        G_t = r_t + γ M_{t+1}                         at a truncation and at the batch's end
        G_t = r_t                                     at a termination

    ``M_{t+1}`` is max_a Q(s_{t+1}, a): ``max_q[t+1]`` (recorded when acting on
    ``s_{t+1}``) inside an episode, ``bootstrap_value[t]`` (the true next observation's)
    where the batch or a truncated episode ends. The λ-recursion stops at every episode
    end, as GAE's does (``rlfw.algos.pg.gae``), so no return leaks across episodes."""
    ends = terminated | truncated
    next_max = torch.empty_like(max_q)
    next_max[:-1] = torch.where(ends[:-1], bootstrap_value[:-1], max_q[1:])
    next_max[-1] = bootstrap_value[-1]
    next_max = next_max.masked_fill(terminated, 0.0)
    goes_on = ~ends
    goes_on[-1] = False  # the batch's end: G_{T} is unknown, M_{T} stands for it
    targets = torch.empty_like(max_q)
    later = torch.zeros_like(max_q[0])  # G_{t+1}
    for t in range(len(reward) - 1, -1, -1):
        blend = torch.where(goes_on[t], (1 - lam) * next_max[t] + lam * later, next_max[t])
        later = reward[t] + gamma * blend
        targets[t] = later
    return targets


class PQN(Algorithm):
    """Parallel Q-learning: per batch, Q(λ) targets from the Q-values recorded at sampling
    time, then ``epochs`` passes of shuffled minibatches on 0.5 (Q(s, a) - G)²; ε-greedy
    acting, ε decaying linearly batch by batch (it travels to the samplers with the
    weights)."""

    config: PQNConfig
    agent: DqnAgent
    # The Q-network reads raw observations (as DQN's): no observation statistics to keep.
    accepts_normalize_obs = False

    def __init__(self, config: PQNConfig | None = None):
        self.config = config or PQNConfig()
        self.config.validate()

    def initialize(
        self, agent: Agent, n_itr: int, seed: int = 0, replicas: Replicas | None = None
    ) -> None:
        if agent.initial_state(1) is not None:
            raise ValueError("pqn learns a feed-forward Q-network; got a recurrent agent")
        self.agent = cast(DqnAgent, agent)  # what the pqn spec builds
        self.n_itr = n_itr
        self.flat, self.optimizer = flat_optimizer(
            self.agent.q.parameters(), self.config, gradient_sync(replicas)
        )
        # Minibatch order has its own stream: reproducible, and saved with checkpoints.
        self.generator = torch.Generator().manual_seed(seed)
        self.updates = 0
        self.agent.set_epsilon(self._epsilon(0))

    def _epsilon(self, batches_done: int) -> float:
        """ε for the batch after ``batches_done``: a function of the iteration alone, so a
        resumed run follows the same schedule."""
        c = self.config
        span = c.exploration_fraction * self.n_itr
        done = 1.0 if span <= 0 else min(batches_done / span, 1.0)
        return c.epsilon_start + done * (c.epsilon_final - c.epsilon_start)

    def optimize(self, samples: Samples, itr: int) -> dict[str, float]:
        c = self.config
        lr = linear_schedule(c.learning_rate, itr, self.n_itr, c.anneal_lr)
        set_lr(self.optimizer, lr)
        max_q = cast(QInfo, samples.agent_info).value  # a DqnAgent's
        targets = q_lambda_targets(
            samples.reward,
            max_q.float(),
            samples.terminated,
            samples.truncated,
            samples.bootstrap_value,
            c.gamma,
            c.lam,
        )
        device = self.agent.device
        columns: tuple[Tree, ...] = (  # the observation (a tree) first, then tensors
            tree_map(lambda x: x.flatten(0, 1).to(device), samples.observation),
            samples.action.flatten(0, 1).to(device),
            targets.flatten().to(device),
        )
        n = targets.numel()
        mb = min(c.minibatch_size, n)
        self.agent.train_mode()
        totals = torch.zeros(len(STATS), dtype=torch.float64)
        grad_norms, n_updates = 0.0, 0
        shuffled: list[Any] = [None] * len(columns)  # each epoch's gather reuses the last's
        for _ in range(c.epochs):
            order = torch.randperm(n, generator=self.generator).to(device)
            shuffled = [tree_take(x, order, out=o) for x, o in zip(columns, shuffled)]
            for start in range(0, n, mb):
                obs, action, target = (tree_index(x, slice(start, start + mb)) for x in shuffled)
                stats, grad_norm = self._minibatch_step(obs, action, target)
                totals += stats
                grad_norms += grad_norm
                n_updates += 1
        self.updates += n_updates
        self.agent.set_epsilon(self._epsilon(itr + 1))  # the next batch acts with it
        out = {f"train/{k}": v / n_updates for k, v in zip(STATS, totals.tolist())}
        out.update(
            {
                "train/grad_norm": grad_norms / n_updates,
                "train/epsilon": float(self.agent.model.epsilon[0]),
                "train/learning_rate": lr,
                "train/n_updates": float(n_updates),
            }
        )
        return out

    def _minibatch_step(
        self, obs: Tree, action: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, float]:
        """One gradient step on 0.5 (Q(s, a) - G)², the semi-gradient of Q-learning (the
        paper's and purejaxql's; CleanRL's MSE is twice it, which RAdam's and Adam's
        steps do not see, only the gradient clip); returns (the ``STATS``, the gradient
        norm)."""
        q = self.agent.q(obs)
        q_taken = q.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
        loss = 0.5 * (q_taken - target).pow(2).mean()
        norm = gradient_step(self.optimizer, self.flat, loss, self.config.max_grad_norm)
        with torch.no_grad():  # summed as tensors: one host read per batch
            stats = torch.stack([loss.detach(), q_taken.mean(), target.mean()])
        return stats, norm

    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.updates = state["updates"]
