"""DQN (Mnih et al., 2015) with double-Q, dueling, n-step and prioritized replay options.

The runner hands over each ``[T, B]`` batch from whatever sampler it uses; the batch goes
into replay unchanged and ``replay_ratio x T x B`` gradient updates follow (once
``learning_starts`` env steps have been collected).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Generic, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from typing_extensions import TypeVar

from rlfw.agents.base import Agent
from rlfw.agents.distributions import mask_values
from rlfw.agents.dqn_agent import DqnAgent, apex_epsilons
from rlfw.algos.base import ReplayAlgorithm
from rlfw.algos.compile import COMPILE_MODES, check_compile, compile_loss
from rlfw.algos.optim import (
    OPTIMIZERS,
    Replicas,
    flat_optimizer,
    gradient_step,
    gradient_sync,
    linear_schedule,
    set_lr,
)
from rlfw.buffers import Samples, tree_map
from rlfw.buffers.replay import (
    PrioritizedSampling,
    Replay,
    ReplayBatch,
    RowStorage,
    UniformSampling,
)
from rlfw.buffers.replay.storage import replay_storage
from rlfw.buffers.tree import Tree
from rlfw.envs.spaces import EnvSpaces
from rlfw.models.q_network import QNetwork
from rlfw.utils.checks import check_config
from rlfw.utils.settings import Flag

# The Q-network's class: ``QNetwork`` (DQN, C51) unless said otherwise (R2D1's recurrent one).
QNet = TypeVar("QNet", bound=nn.Module, default=QNetwork)
# (loss, Q of the taken actions, per-sample priority) of a batch: ``DQN._losses``, compiled or not
Losses = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


@dataclass
class DQNConfig:
    """DQN hyper-parameters (defaults: SB3's DQN)."""

    learning_rate: Annotated[float, Flag("--lr")] = 1e-4
    """The optimizer's step size."""
    anneal_lr: bool = False
    """Decay the learning rate linearly to 0 over the run."""
    optimizer: str = "adam"
    """'adam', 'rmsprop' or 'radam'."""
    optimizer_eps: float = 1e-8
    """The optimizer's epsilon."""
    gamma: float = 0.99
    """Discount factor."""
    batch_size: int = 32
    """Transitions per gradient update (r2d1: sequences)."""
    replay_capacity: int = 1_000_000
    """Transitions the replay holds."""
    learning_starts: int = 100
    """Env steps before the first update."""
    replay_ratio: float = 0.25
    """Gradient updates per env step (SB3's train_freq 4 with one gradient step: 0.25)."""
    target_update_interval: int = 10_000
    """Env steps between target-network updates."""
    tau: float = 1.0
    """Target update: 1 copies the weights, < 1 moves them this far (Polyak averaging)."""
    double_dqn: Annotated[bool, Flag("--double", const=True)] = False
    """Double-DQN targets: the online network picks the next action (SB3's default: off)."""
    dueling: Annotated[bool, Flag("--dueling", const=True)] = False
    """A dueling Q head (value and advantage streams)."""
    n_step: Annotated[int, Flag("--n-step")] = 1
    """Steps of the return before bootstrapping."""
    advantage_learning: float = 0.0
    """α of Bellemare et al. 2016's action-gap term (0: off)."""
    prioritized: Annotated[bool, Flag("--prioritized", const=True)] = False
    """Prioritized replay (proportional, a sum tree)."""
    priority_alpha: float = 0.6
    """Prioritized replay: how strongly priorities shape sampling."""
    priority_beta: float = 0.4
    """Prioritized replay: the importance-weight exponent, annealed linearly to 1."""
    huber_delta: float = 1.0
    """Where the Huber loss turns from quadratic to linear."""
    max_grad_norm: float | None = 10.0
    """Clip the gradient's global norm to this (none: no clipping)."""
    epsilon_start: float = 1.0
    """ε-greedy exploration: ε at the start."""
    epsilon_final: float = 0.05
    """ε-greedy exploration: ε after its decay."""
    exploration_fraction: float = 0.1
    """Fraction of the run over which ε decays linearly."""
    apex_epsilon: Annotated[bool, Flag("--apex-epsilon", const=True)] = False
    """A fixed ε per env slot, 0.4^(1 + 7 i/(B-1)), as in Ape-X."""
    frame_dedup: bool | None = None
    """Store stacked uint8 frames once (Atari: 4x less memory); none: when the env stacks
    frames."""
    save_replay: Annotated[bool, Flag("--save-replay", const=True)] = False
    """Put the replay into checkpoints, so a resumed run is bitwise identical (large on
    Atari)."""
    eval_epsilon: float = 0.0
    """ε of evaluation episodes played with sampled actions (the Atari preset: 0.05)."""
    compile: Annotated[bool | None, Flag("--compile", choices=COMPILE_MODES)] = None
    """torch.compile the learner's loss: on, off, or auto (none: where it pays off)."""

    def for_env(self, spaces: EnvSpaces) -> "DQNConfig":
        """This config with its env-dependent choices made for ``spaces``' env."""
        if self.frame_dedup is not None:
            return self
        return dataclasses.replace(self, frame_dedup=spaces.frame_stack > 1)

    def validate(self) -> None:
        check_config(
            "DQNConfig",
            learning_rate=(self.learning_rate, self.learning_rate > 0, "must be > 0"),
            optimizer=(self.optimizer, self.optimizer in OPTIMIZERS, f"one of {OPTIMIZERS}"),
            gamma=(self.gamma, 0 <= self.gamma <= 1, "must be in [0, 1]"),
            batch_size=(
                self.batch_size,
                isinstance(self.batch_size, int) and self.batch_size > 0,
                "must be a positive int",
            ),
            replay_capacity=(
                self.replay_capacity,
                self.replay_capacity >= self.batch_size,
                f"must be >= batch_size ({self.batch_size})",
            ),
            replay_ratio=(
                self.replay_ratio,
                self.replay_ratio > 0,
                "must be > 0 (gradient updates per env step)",
            ),
            n_step=(
                self.n_step,
                isinstance(self.n_step, int) and self.n_step >= 1,
                "must be an int >= 1",
            ),
            tau=(self.tau, 0 < self.tau <= 1, "must be in (0, 1]"),
            advantage_learning=(
                self.advantage_learning,
                0 <= self.advantage_learning < 1,
                "must be in [0, 1) (0: plain Q-learning)",
            ),
            target_update_interval=(
                self.target_update_interval,
                self.target_update_interval > 0,
                "must be > 0",
            ),
            learning_starts=(self.learning_starts, self.learning_starts >= 0, "must be >= 0"),
            exploration_fraction=(
                self.exploration_fraction,
                0 <= self.exploration_fraction <= 1,
                "must be in [0, 1]",
            ),
            eval_epsilon=(self.eval_epsilon, 0 <= self.eval_epsilon <= 1, "must be in [0, 1]"),
            epsilon_start=(self.epsilon_start, 0 <= self.epsilon_start <= 1, "must be in [0, 1]"),
            epsilon_final=(self.epsilon_final, 0 <= self.epsilon_final <= 1, "must be in [0, 1]"),
            optimizer_eps=(self.optimizer_eps, self.optimizer_eps > 0, "must be > 0"),
            huber_delta=(self.huber_delta, self.huber_delta > 0, "must be > 0"),
            max_grad_norm=(
                self.max_grad_norm,
                self.max_grad_norm is None or self.max_grad_norm > 0,
                "None or > 0",
            ),
            priority_alpha=(
                self.priority_alpha,
                self.priority_alpha >= 0,
                "must be >= 0 (0: uniform sampling)",
            ),
            priority_beta=(self.priority_beta, 0 <= self.priority_beta <= 1, "must be in [0, 1]"),
            compile=check_compile(self.compile),
        )


class DQN(ReplayAlgorithm, Generic[QNet]):
    """Deep Q-learning on the common replay: each ``optimize(samples, itr)`` appends the
    ``[T, B]`` batch, then runs ``replay_ratio x T x B`` gradient steps on uniform or
    prioritized n-step minibatches against a target network (hard copies every
    ``target_update_interval`` env steps, or Polyak averaging with ``tau < 1``); it also
    drives the agent's per-slot ε schedule."""

    config: DQNConfig
    agent: DqnAgent[QNet]

    def __init__(self, config: DQNConfig | None = None):
        self.config = config or DQNConfig()
        self.config.validate()
        self.replay: Replay | None = None
        self._pending_replay: dict[str, Any] | None = None  # from a checkpoint, until replay exists

    def initialize(
        self, agent: Agent, n_itr: int, seed: int = 0, replicas: Replicas | None = None
    ) -> None:
        """Bind to ``agent`` for ``n_itr`` iterations; ``replicas`` (multi-rank runs)
        average each gradient across the learner replicas."""
        c = self.config
        # what the DQN, C51 and R2D1 specs build
        self.agent, self.n_itr, self.seed = cast("DqnAgent[QNet]", agent), n_itr, seed
        self.target = copy.deepcopy(self.agent.q)
        self.target.requires_grad_(False)
        self.flat, self.optimizer = flat_optimizer(
            self.agent.q.parameters(), c, gradient_sync(replicas)
        )
        self._loss: Losses | None = None  # compiled or not at the first update
        self.updates = 0
        self.update_budget = 0.0
        self.last_target_step = 0
        if self.replay is None:  # else made already, for batches of a known size (async)
            self.steps_per_itr = 0
        self._set_epsilon(0)

    # -- exploration ---------------------------------------------------------------------
    def _set_epsilon(self, env_steps: int) -> None:
        c = self.config
        batch_B = len(self.agent.model.epsilon)
        if c.apex_epsilon:
            self.agent.set_epsilon(apex_epsilons(batch_B))
            return
        total = max(self.n_itr * self.steps_per_itr, 1)
        frac = min(env_steps / max(c.exploration_fraction * total, 1e-9), 1.0)
        self.agent.set_epsilon(c.epsilon_start + frac * (c.epsilon_final - c.epsilon_start))

    # -- replay --------------------------------------------------------------------------
    def make_replay(
        self, samples: Samples, shared: bool = False, seed: int | None = None, reserve_rows: int = 0
    ) -> Replay:
        """The replay for batches shaped like ``samples`` (in shared memory if ``shared``:
        the async runner's sampler process appends to it, up to ``reserve_rows`` ahead of
        what the learner sees), holding a checkpoint's replay if one was loaded; its
        sampling is seeded with ``seed`` (default: the run's)."""
        self.replay = self._new_replay(
            samples, shared, self.seed if seed is None else seed, reserve_rows
        )
        self.steps_per_itr = samples.reward.numel()
        if self._pending_replay is not None:
            self.replay.load_state_dict(self._pending_replay)
            self._pending_replay = None
        return self.replay

    def _new_replay(self, samples: Samples, shared: bool, seed: int, reserve_rows: int) -> Replay:
        c = self.config
        B = samples.reward.shape[1]
        storage = self._storage(samples, c.replay_capacity // B + reserve_rows, shared)
        sampling = (
            PrioritizedSampling(c.priority_alpha, c.priority_beta, seed=seed)
            if c.prioritized
            else UniformSampling(seed)
        )
        return Replay(storage, sampling, c.n_step, c.gamma, reserve_rows)

    def _storage(self, samples: Samples, rows: int, shared: bool) -> RowStorage:
        """``rows`` rows of the batch's B columns (``replay_storage``, frame-deduplicated
        as ``frame_dedup`` says)."""
        return replay_storage(samples, rows, shared, self.config.frame_dedup)

    # -- learning ------------------------------------------------------------------------
    def learn_from_replay(self, itr: int) -> dict[str, float]:
        """The ``replay_ratio x T x B`` updates that batch ``itr`` (already in replay) pays
        for, once ``learning_starts`` env steps are in; then the ε schedule moves on."""
        c = self.config
        env_steps = (itr + 1) * self.steps_per_itr
        stats: dict[str, list[float]] = {"loss": [], "q": [], "grad_norm": [], "td_abs": []}
        assert self.replay is not None  # the runner appended batch ``itr``, so it is made
        if env_steps >= c.learning_starts:
            self.update_budget += c.replay_ratio * self.steps_per_itr
            if c.prioritized:
                self._set_beta(
                    c.priority_beta + (1 - c.priority_beta) * min(itr / max(self.n_itr - 1, 1), 1.0)
                )
            if env_steps - self.last_target_step >= c.target_update_interval:
                self._update_target()
                self.last_target_step = env_steps
            set_lr(self.optimizer, linear_schedule(c.learning_rate, itr, self.n_itr, c.anneal_lr))
            self.agent.train_mode()
            while self.update_budget >= 1.0:
                self.update_budget -= 1.0
                self._learn(self.replay.sample(c.batch_size), stats)
        self._set_epsilon(env_steps)
        out = {f"train/{k}": float(np.mean(v)) for k, v in stats.items() if v}
        out.update(
            {
                "train/epsilon": float(self.agent.model.epsilon.mean()),
                "train/learning_rate": float(self.optimizer.param_groups[0]["lr"]),
                "train/updates": float(self.updates),
                "train/replay_size": float(len(self.replay)),
            }
        )
        return out

    def _set_beta(self, beta: float) -> None:
        """Prioritized replay's importance-sampling exponent for the next minibatches."""
        assert self.replay is not None  # called while learning from it
        cast(PrioritizedSampling, self.replay.sampling).beta = beta  # called when prioritized

    def _learn(self, batch: ReplayBatch, stats: dict[str, list[float]]) -> None:
        if self._loss is None:  # the auto rule needs the run's length in gradient steps
            n_steps = int(self.config.replay_ratio * self.n_itr * self.steps_per_itr)
            self._loss = compile_loss(self._losses, self.config.compile, self.agent.q, n_steps)
        loss, q_taken, td_abs = self._loss(
            batch.observation,
            batch.next_observation,
            batch.action,
            batch.n_step_return,
            batch.bootstrap_discount,
            batch.next_value_known,
            batch.next_value,
            batch.weight,
        )
        norm = gradient_step(self.optimizer, self.flat, loss, self.config.max_grad_norm)
        self.updates += 1
        assert self.replay is not None  # the batch came from it
        self.replay.update_priorities(batch.index, td_abs.numpy())
        loss, q_mean, td_mean = torch.stack([loss.detach(), q_taken.mean(), td_abs.mean()]).tolist()
        stats["loss"].append(loss)
        stats["q"].append(q_mean)
        stats["grad_norm"].append(norm)
        stats["td_abs"].append(td_mean)

    def _losses(
        self,
        observation: Tree,
        next_observation: Tree,
        action: torch.Tensor,
        n_step_return: torch.Tensor,
        bootstrap_discount: torch.Tensor,
        next_value_known: torch.Tensor,
        next_value: torch.Tensor,
        weight: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(Huber TD loss, Q of the taken actions, |TD error|) of a replay batch: what
        ``compile`` compiles."""
        c = self.config
        n = len(action)
        q_all, next_best = self.agent.q(observation), None
        if c.double_dqn:
            # The online net picks a* in a pass of its own without autograd: one pass over
            # [obs; next_obs] would make the backward pass run over both halves, 2x the rows.
            with torch.no_grad():
                next_online = self.agent.q(next_observation)
                if self.agent.masked:
                    next_online = mask_values(next_online, next_observation)
                next_best = next_online.argmax(-1, keepdim=True)
        q_taken = q_all.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
        with torch.no_grad():
            alpha = c.advantage_learning
            if alpha > 0:  # one target pass over [next_obs; obs]
                both = tree_map(lambda a, b: torch.cat([a, b]), next_observation, observation)
                target_both = self.target(both)
                next_q, target_q = target_both[:n], target_both[n:]
                if self.agent.masked:
                    target_q = mask_values(target_q, observation)
            else:
                next_q = self.target(next_observation)
            if self.agent.masked:  # the max over the next state's valid actions
                next_q = mask_values(next_q, next_observation)
            next_v = (
                next_q.gather(-1, next_best).squeeze(-1)
                if next_best is not None
                else next_q.max(-1).values
            )
            next_v = torch.where(next_value_known, next_value, next_v)
            y = n_step_return + bootstrap_discount * next_v
            if alpha > 0:
                # Advantage learning: lower the target of actions worse than the greedy
                # one by α x their gap, so near-equal actions separate (see the preset).
                taken = target_q.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
                y = y - alpha * (target_q.max(-1).values - taken)
        if c.prioritized:
            loss = (weight * F.huber_loss(q_taken, y, reduction="none", delta=c.huber_delta)).mean()
        else:  # all weights are 1
            loss = F.huber_loss(q_taken, y, delta=c.huber_delta)
        q_taken = q_taken.detach()
        return loss, q_taken, (q_taken - y).abs()

    @torch.no_grad()
    def _update_target(self) -> None:
        tau = self.config.tau
        for target, online in zip(self.target.parameters(), self.agent.q.parameters()):
            target.lerp_(online, tau) if tau < 1 else target.copy_(online)

    # -- checkpoints ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = {
            "optimizer": self.optimizer.state_dict(),
            "target": self.target.state_dict(),
            "updates": self.updates,
            "update_budget": self.update_budget,
            "last_target_step": self.last_target_step,
            "steps_per_itr": self.steps_per_itr,
            "replay": None,
        }
        if self.config.save_replay and self.replay is not None:
            state["replay"] = self.replay.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.target.load_state_dict(state["target"])
        self.updates, self.update_budget = state["updates"], state["update_budget"]
        self.last_target_step = state["last_target_step"]
        self.steps_per_itr = state["steps_per_itr"]
        if self.replay is not None and state["replay"] is not None:
            self.replay.load_state_dict(state["replay"])  # made already (async runner)
        else:
            self._pending_replay = state["replay"]
        if state["replay"] is None:
            import warnings

            warnings.warn(
                "checkpoint holds no replay buffer (save_replay=False): the resumed "
                "run refills replay from empty and is not bitwise identical",
                stacklevel=2,
            )
