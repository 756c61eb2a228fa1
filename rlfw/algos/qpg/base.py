"""What SAC, TD3 and DDPG share: their common settings, the replay they learn from, the
replay-ratio budget, the warm-up, Polyak target updates and checkpoints. Each algorithm
adds its own ``_update(batch)``.

The update ratio, in one place: ``replay_ratio`` is gradient updates per env step. SB3
counts ``gradient_steps`` per ``train_freq`` calls of ``env.step`` over ``n_envs`` envs, so
its ratio is ``gradient_steps / (train_freq x n_envs)``: ``train_freq=1, gradient_steps=1``
(SAC's and TD3's default) with one env is 1.0; ``train_freq=8, gradient_steps=8`` is 1.0
too; ``train_freq=4, gradient_steps=1`` is 0.25. A batch of ``T x B`` env steps pays for
``replay_ratio x T x B`` updates, made after it is appended.
"""

from __future__ import annotations

import copy
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Iterator, TypeVar, cast

import numpy as np
import torch
from torch import nn

from rlfw.agents.base import Agent
from rlfw.agents.qpg_agent import QpgAgent
from rlfw.algos.base import ReplayAlgorithm
from rlfw.algos.flat_params import FlatParameters
from rlfw.algos.optim import Replicas, flat_optimizer, gradient_step, gradient_sync
from rlfw.buffers import Samples
from rlfw.buffers.replay import PrioritizedSampling, Replay, ReplayBatch, UniformSampling
from rlfw.buffers.replay.her import HER_STRATEGIES, EnvGoalReward, HerReplay, check_goal_space
from rlfw.buffers.replay.storage import replay_storage
from rlfw.buffers.tree import tree_from_numpy, tree_to
from rlfw.envs import EnvFactory, EnvSpaces
from rlfw.utils.checks import check_config
from rlfw.utils.settings import Flag

Module = TypeVar("Module", bound=nn.Module)
MATMUL_PRECISIONS = ("highest", "high", "medium")


@contextmanager
def float32_matmul_precision(precision: str) -> Iterator[None]:
    """torch's float32 matmul precision set for the block, the caller's restored after:
    the setting is process-wide, and acting, evaluation and anything else in the process
    keep theirs."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


@dataclass
class QpgConfig:
    """Settings every Q-function policy-gradient algorithm has (defaults: SB3's)."""

    learning_rate: Annotated[float, Flag("--lr")] = 3e-4
    """The step size of the actor's and the critics' Adam optimizers."""
    gamma: float = 0.99
    """Discount factor."""
    batch_size: int = 256
    """Transitions per gradient update."""
    replay_capacity: int = 1_000_000
    """Transitions the replay holds."""
    learning_starts: int = 100
    """Env steps collected with uniformly random actions before the first update."""
    replay_ratio: float = 1.0
    """Gradient updates per env step (SB3: gradient_steps / (train_freq x n_envs))."""
    tau: float = 0.005
    """Polyak averaging of the target networks: they move this far each update."""
    n_step: Annotated[int, Flag("--n-step")] = 1
    """Steps of the return before bootstrapping."""
    prioritized: Annotated[bool, Flag("--prioritized", const=True)] = False
    """Prioritized replay (proportional, by the critics' mean |TD error|)."""
    priority_alpha: float = 0.6
    """Prioritized replay: how strongly priorities shape sampling."""
    priority_beta: float = 0.4
    """Prioritized replay: the importance-weight exponent, annealed linearly to 1."""
    n_critics: int = 2
    """Q-functions whose minimum is the target (DDPG: 1)."""
    critic_hidden: tuple[int, ...] | None = None
    """Widths of the critics' hidden layers (none: the run's ``hidden``)."""
    save_replay: Annotated[bool, Flag("--save-replay", const=True)] = False
    """Put the replay into checkpoints, so a resumed run is bitwise identical."""
    her: str | None = None
    """Hindsight experience replay for goal-conditioned envs: 'future' (none: off)."""
    her_k: int = 4
    """HER: relabelled goals per real one (SB3's n_sampled_goal): k / (k + 1) relabelled."""
    matmul_precision: str = "highest"
    """Float32 matmuls of the updates, as ``torch.set_float32_matmul_precision``: 'highest'
    (float32), 'high' (TF32 on GPUs that have it), 'medium' (bfloat16 multiplicands with
    float32 sums: AMX on recent Xeons, tensor cores on GPUs). Not 'highest': other bits."""

    def validate(self) -> None:
        name = type(self).__name__
        check_config(
            name,
            learning_rate=(self.learning_rate, self.learning_rate > 0, "must be > 0"),
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
            learning_starts=(self.learning_starts, self.learning_starts >= 0, "must be >= 0"),
            replay_ratio=(self.replay_ratio, self.replay_ratio > 0, "must be > 0"),
            tau=(self.tau, 0 < self.tau <= 1, "must be in (0, 1]"),
            n_step=(
                self.n_step,
                isinstance(self.n_step, int) and self.n_step >= 1,
                "must be an int >= 1",
            ),
            priority_alpha=(self.priority_alpha, self.priority_alpha >= 0, "must be >= 0"),
            priority_beta=(self.priority_beta, 0 <= self.priority_beta <= 1, "must be in [0, 1]"),
            her=(self.her, self.her in (None, *HER_STRATEGIES), f"none or {HER_STRATEGIES}"),
            her_k=(self.her_k, isinstance(self.her_k, int) and self.her_k >= 1, "an int >= 1"),
            n_critics=(
                self.n_critics,
                isinstance(self.n_critics, int) and self.n_critics >= 1,
                "must be an int >= 1",
            ),
            matmul_precision=(
                self.matmul_precision,
                self.matmul_precision in MATMUL_PRECISIONS,
                f"must be one of {MATMUL_PRECISIONS}",
            ),
        )
        if self.her is not None and (self.n_step != 1 or self.prioritized):
            raise ValueError(
                f"her={self.her!r} relabels 1-step transitions drawn uniformly: set "
                f"n_step=1 (got {self.n_step}) and prioritized=false (got {self.prioritized})"
            )


class QFunctionPolicyGradient(ReplayAlgorithm):
    """The family's learner: each batch is appended to a replay (n-step and prioritized
    optional), then ``replay_ratio x T x B`` updates follow once ``learning_starts`` env
    steps are in; until then the agent's actions are the warm-up's uniform ones. Truncated
    steps bootstrap from their true final observation (the replay keeps it), terminated
    ones not at all. Subclasses build their optimizers in ``_setup`` and make one update
    in ``_update``, returning its statistics as tensors."""

    config: QpgConfig
    agent: QpgAgent
    replay: Replay | None
    accepts_normalize_obs = True  # the replay keeps raw rows; the networks see them standardized
    critic_loss_scale = 0.5
    """The critics' loss is this times the sum of the members' mean squared TD errors: SAC's
    J_Q has the 1/2 (as SB3's SAC), TD3's reference code (Fujimoto's, SB3's) has none. Adam
    is blind to the scale except where a gradient is near its epsilon, and there it is not."""

    def __init__(self, config: QpgConfig | None = None):
        self.config = config or self.default_config()
        self.config.validate()
        self.replay = None  # made from the first batch (``make_replay``)
        self.goal_reward: EnvGoalReward | None = None  # HER's (``bind_env``)
        self._pending_replay: dict[str, Any] | None = None  # from a checkpoint, until replay exists
        # Updates begin once this many env steps are in: learning_starts, or, after a resume
        # whose checkpoint held no replay, learning_starts past the resume (the warm-up of
        # a fresh run, refilling the empty replay). None: to be set at the next batch.
        self.learning_from: int | None = self.config.learning_starts

    @staticmethod
    def default_config() -> QpgConfig:
        raise NotImplementedError

    def initialize(
        self, agent: Agent, n_itr: int, seed: int = 0, replicas: Replicas | None = None
    ) -> None:
        # what the SAC, TD3 and DDPG specs build
        self.agent, self.n_itr, self.seed = cast(QpgAgent, agent), n_itr, seed
        self.grad_sync = gradient_sync(replicas)
        self.critic_target = frozen_copy(self.agent.critics)
        self.critic_flat, self.critic_optimizer = self._optimizer(self.agent.critics)
        # The learner's own noise (policy samples, target smoothing): one seeded stream,
        # checkpointed, so a resumed run draws what the whole run would have.
        self.generator = torch.Generator(device=self.agent.device).manual_seed(seed + 1_000_003)
        self.updates = 0
        self.update_budget = 0.0
        if self.replay is None:
            self.steps_per_itr = 0
        self._setup()
        self.agent.set_warmup(self.config.learning_starts > 0)

    def _setup(self) -> None:
        """The algorithm's own optimizers and target networks."""

    def _optimizer(self, module: nn.Module) -> tuple[FlatParameters, torch.optim.Optimizer]:
        settings = _AdamSettings(self.config.learning_rate)
        return flat_optimizer(module.parameters(), settings, self.grad_sync)

    def bind_env(self, env_factory: EnvFactory) -> None:
        """What the learner needs from the env itself: with HER, its goal keys and its
        ``compute_reward`` (checked now, before any work)."""
        if self.config.her is None:
            return
        check_goal_space(EnvSpaces.of(env_factory).observation)
        self.goal_reward = EnvGoalReward(env_factory)
        self.goal_reward.check()

    # -- replay --------------------------------------------------------------------------
    def make_replay(
        self, samples: Samples, shared: bool = False, seed: int | None = None, reserve_rows: int = 0
    ) -> Replay:
        c = self.config
        if samples.final_observation is None:
            raise ValueError(
                f"{type(self).__name__} bootstraps truncated steps from their final "
                "observation, and these batches carry none: the agent must have "
                "keeps_final_observation"
            )
        B = samples.reward.shape[1]
        storage = replay_storage(samples, c.replay_capacity // B + reserve_rows, shared, False)
        storage.keep_final_observations()
        seed = self.seed if seed is None else seed
        sampling = (
            PrioritizedSampling(c.priority_alpha, c.priority_beta, seed=seed)
            if c.prioritized
            else UniformSampling(seed)
        )
        if c.her is None:
            self.replay = Replay(storage, sampling, c.n_step, c.gamma, reserve_rows)
        elif self.goal_reward is None:
            raise ValueError(
                f"her={c.her!r} recomputes rewards with the env's compute_reward: call "
                "bind_env(env_factory) before the first batch (build_runner does)"
            )
        else:
            self.replay = HerReplay(
                storage, sampling, c.gamma, self.goal_reward, c.her_k, seed + 1, reserve_rows
            )
        self.steps_per_itr = samples.reward.numel()
        if self._pending_replay is not None:
            self.replay.load_state_dict(self._pending_replay)
            self._pending_replay = None
        return self.replay

    # -- learning ------------------------------------------------------------------------
    def learn_from_replay(self, itr: int) -> dict[str, float]:
        c = self.config
        env_steps = (itr + 1) * self.steps_per_itr
        if self.learning_from is None:  # the first batch into a replay refilled from empty
            self.learning_from = itr * self.steps_per_itr + c.learning_starts
        stats: dict[str, list[torch.Tensor]] = {}
        self._update_statistics()
        assert self.replay is not None  # the runner appended a batch, so it is made
        # len(): a replay can hold steps and none sampleable yet (each needs n_step after it)
        if env_steps >= self.learning_from and len(self.replay) > 0:
            self.update_budget += c.replay_ratio * self.steps_per_itr
            if c.prioritized:
                progress = min(itr / max(self.n_itr - 1, 1), 1.0)
                sampling = cast(PrioritizedSampling, self.replay.sampling)
                sampling.beta = c.priority_beta + (1 - c.priority_beta) * progress
            self.agent.train_mode()
            with float32_matmul_precision(c.matmul_precision):
                while self.update_budget >= 1.0:
                    self.update_budget -= 1.0
                    batch = self._prepared(self.replay.sample(c.batch_size))
                    for key, value in self._update(batch).items():
                        stats.setdefault(key, []).append(value)
                    self.updates += 1
        self.agent.set_warmup(env_steps < c.learning_starts)
        out = {f"train/{k}": float(torch.stack(v).float().mean()) for k, v in stats.items()}
        out["train/updates"] = float(self.updates)
        out["train/replay_size"] = float(len(self.replay))
        return out

    def _update(self, batch: ReplayBatch) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def _update_statistics(self) -> None:
        """With ``normalize_obs``: merge the newest batch's raw observations (the replay's
        newest rows the learner sees) into the statistics, once per batch."""
        if self.agent.model.normalizer is None:
            return
        assert self.replay is not None  # the runner appended a batch, so it is made
        s = self.replay.storage
        written = self.replay._seen()[0]
        rows = (written - self.steps_per_itr // s.B + np.arange(self.steps_per_itr // s.B)) % s.T
        obs = s.observations(np.repeat(rows, s.B), np.tile(np.arange(s.B), len(rows)))
        self.agent.update_normalization(tree_from_numpy(obs))

    def _prepared(self, batch: ReplayBatch) -> ReplayBatch:
        """The batch on the agent's device, its observations standardized by the current
        statistics (raw in the replay, as SB3 keeps them, so old rows are read with
        today's statistics)."""
        device, normalize = self.agent.device, self.agent.model.normalize
        return batch._replace(
            observation=normalize(tree_to(batch.observation, device)),
            next_observation=normalize(tree_to(batch.next_observation, device)),
            action=batch.action.to(device),
            n_step_return=batch.n_step_return.to(device),
            bootstrap_discount=batch.bootstrap_discount.to(device),
            weight=batch.weight.to(device),
        )

    def _critic_step(self, batch: ReplayBatch, target: torch.Tensor) -> dict[str, torch.Tensor]:
        """One critic update towards ``target`` (every member at once: one forward, one
        backward), importance-weighted under prioritized replay, whose priorities become
        the members' mean |TD error|."""
        q = self.agent.critics(batch.observation, batch.action)  # [E, N]
        td = q - target
        if self.config.prioritized:
            loss = self.critic_loss_scale * (batch.weight * td.pow(2)).mean(-1).sum()
        else:
            loss = self.critic_loss_scale * td.pow(2).mean(-1).sum()
        gradient_step(self.critic_optimizer, self.critic_flat, loss, None)
        td_abs = td.detach().abs().mean(0)
        if self.config.prioritized:  # the only reader: no device-to-host copy otherwise
            assert self.replay is not None  # the batch came from it
            self.replay.update_priorities(batch.index, td_abs.cpu().numpy())
        return {"critic_loss": loss.detach(), "q": q.detach().mean(), "td_abs": td_abs.mean()}

    def _bootstrap(self, batch: ReplayBatch, next_value: torch.Tensor) -> torch.Tensor:
        """The n-step TD target from the next state's value (0 after a termination)."""
        return batch.n_step_return + batch.bootstrap_discount * next_value

    def _normal(self, shape: torch.Size) -> torch.Tensor:
        return torch.randn(shape, generator=self.generator, device=self.agent.device)

    # -- checkpoints ---------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        """The algorithm's own part of the checkpoint."""
        return {}

    def _load_state(self, state: dict[str, Any]) -> None: ...

    def state_dict(self) -> dict[str, Any]:
        state = {
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "generator": self.generator.get_state(),
            "updates": self.updates,
            "update_budget": self.update_budget,
            "steps_per_itr": self.steps_per_itr,
            "learning_from": self.learning_from,
            "replay": None,
            **self._state(),
        }
        if self.config.save_replay and self.replay is not None:
            state["replay"] = self.replay.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.critic_target.load_state_dict(state["critic_target"])
        self.generator.set_state(state["generator"])
        self.updates, self.update_budget = state["updates"], state["update_budget"]
        self.steps_per_itr = state["steps_per_itr"]
        # checkpoints written before learning_from was kept: learning_starts, as then
        self.learning_from = state.get("learning_from", self.config.learning_starts)
        self._load_state(state)
        if self.replay is not None and state["replay"] is not None:
            self.replay.load_state_dict(state["replay"])
        else:
            self._pending_replay = state["replay"]
        if state["replay"] is None:
            self.learning_from = None  # set from the first batch after the resume
            warnings.warn(
                "checkpoint holds no replay buffer (save_replay=False): the resumed run "
                f"refills it from empty and updates again after learning_starts="
                f"{self.config.learning_starts} new env steps; it is not bitwise identical "
                "to an uninterrupted run (save_replay=True is)",
                stacklevel=2,
            )


@dataclass(frozen=True)
class _AdamSettings:
    """What ``flat_optimizer`` reads: Adam with torch's default epsilon (SB3's)."""

    learning_rate: float
    optimizer: str = "adam"
    optimizer_eps: float = 1e-8


def frozen_copy(module: Module) -> Module:
    """A target network: a copy of ``module`` that autograd never touches."""
    target = copy.deepcopy(module)
    target.requires_grad_(False)
    return target


@torch.no_grad()
def polyak(target: nn.Module, online: nn.Module, tau: float) -> None:
    """``target <- target + tau (online - target)`` on every parameter in one fused op."""
    torch._foreach_lerp_(list(target.parameters()), list(online.parameters()), tau)
