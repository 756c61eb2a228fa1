"""Proximal policy optimization with clipped surrogate (Schulman et al., 2017)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Callable, cast

import torch

from rlfw.agents.actor_critic import ActorCriticAgent, EncodedObservations
from rlfw.agents.base import Agent, Observation
from rlfw.agents.distributions import Categorical
from rlfw.algos.compile import COMPILE_MODES, check_compile, compile_loss
from rlfw.algos.optim import Replicas, gradient_step, linear_schedule, set_lr
from rlfw.algos.pg.base import PolicyGradient
from rlfw.algos.pg.categorical_loss import categorical_ppo_loss
from rlfw.algos.pg.common import (
    advantages,
    agent_info,
    common_checks,
    current_policy,
    explained_variance,
    kept,
    present_rows,
)
from rlfw.buffers import Samples, tree_index, tree_map, tree_take
from rlfw.utils.checks import check_config
from rlfw.utils.settings import Flag

AMP_MODES = (None, "bf16")  # bf16 needs no loss scaling, unlike fp16
# "max": the larger of the clipped and unclipped squared errors (OpenAI baselines' PPO2,
# CleanRL, PureJaxRL); "clipped": the clipped prediction's error alone (SB3)
VALUE_CLIP_FORMS = ("max", "clipped")
STATS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")

# (the loss, the ``STATS``) of a minibatch: ``PPO._losses``, compiled or not
Losses = Callable[..., tuple[torch.Tensor, torch.Tensor]]


@dataclass
class PPOConfig:
    """PPO hyper-parameters (defaults: SB3's PPO)."""

    learning_rate: Annotated[float, Flag("--lr")] = 3e-4
    """The optimizer's step size."""
    anneal_lr: bool = False
    """Decay the learning rate linearly to 0 over the run."""
    optimizer: str = "adam"
    """'adam', 'rmsprop' or 'radam'."""
    optimizer_eps: float = 1e-5
    """The optimizer's epsilon (SB3's and CleanRL's Adam 1e-5; torch's 1e-8 sharpens
    faster)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE's λ (1: Monte Carlo returns bootstrapped at the batch's end)."""
    epochs: int = 10
    """Passes over each batch."""
    minibatch_size: int = 64
    """Env steps per minibatch (an epoch's last may be smaller)."""
    clip: float = 0.2
    """The surrogate's clip range ε."""
    anneal_clip: bool = False
    """Decay ε linearly with the learning-rate schedule's fraction."""
    value_clip: float | None = None
    """Clip value updates to ±this around the sampling-time value (none: no clipping)."""
    value_clip_form: str = "max"
    """How the clipped value loss combines: 'max' (baselines, CleanRL) or 'clipped' (SB3)."""
    value_coef: float = 0.5
    """Weight of the value loss, on the plain squared error (SB3's form; CleanRL and
    PureJaxRL halve the error first, so their vf_coef 0.5 is 0.25 here)."""
    entropy_coef: Annotated[float, Flag("--entropy-coef")] = 0.0
    """Weight of the entropy bonus."""
    max_grad_norm: float | None = 0.5
    """Clip the gradient's global norm to this (none: no clipping)."""
    normalize_reward: bool = False
    """Scale rewards by the running std of the discounted return."""
    reward_clip: float = 10.0
    """Scaled rewards are clipped to ±this."""
    normalize_advantage: bool = True
    """Normalize advantages per minibatch."""
    advantage: str = "gae"
    """The advantage estimator: 'gae', or 'vtrace' (IMPALA's targets from the learner's
    current policy and values, recomputed at the start of every epoch, for batches
    sampled by older weights; the surrogate's ratio stays against the sampling policy)."""
    vtrace_rho: float = 1.0
    """V-trace's ρ̄: the truncation of the importance weights in the advantages and
    temporal differences (the fixed point's policy lies between μ and π)."""
    vtrace_c: float = 1.0
    """V-trace's c̄: the truncation of the trace coefficients (how far a correction
    propagates back); gae_lambda scales them as the paper's λ."""
    compile: Annotated[bool | None, Flag("--compile", choices=COMPILE_MODES)] = None
    """torch.compile the learner's loss: on, off, or auto (none: where the run is long
    enough to win back the compile time)."""
    amp: str | None = None
    """'bf16': the forward pass and the loss under bfloat16 autocast (none: float32)."""

    def validate(self) -> None:
        check_config(
            type(self).__name__,
            **common_checks(self),
            amp=(self.amp, self.amp in AMP_MODES, f"one of {AMP_MODES}"),
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
            clip=(self.clip, self.clip > 0, "must be > 0"),
            value_clip=(
                self.value_clip,
                self.value_clip is None or self.value_clip > 0,
                "None or > 0",
            ),
            value_clip_form=(
                self.value_clip_form,
                self.value_clip_form in VALUE_CLIP_FORMS,
                f"one of {VALUE_CLIP_FORMS}",
            ),
            compile=check_compile(self.compile),
        )


class PPO(PolicyGradient):
    """Proximal policy optimization: per batch, GAE advantages, then ``epochs`` passes of
    shuffled minibatches on the clipped surrogate, (optionally clipped) value loss and
    entropy bonus. Its importance ratio against the sampling policy's log-probs also
    corrects for a lag between the sampling and the learning policy."""

    config: PPOConfig
    _closed_form = False  # set by ``initialize`` from the agent's distribution

    @classmethod
    def default_config(cls) -> PPOConfig:
        return PPOConfig()

    def initialize(
        self, agent: Agent, n_itr: int, seed: int = 0, replicas: Replicas | None = None
    ) -> None:
        super().initialize(agent, n_itr, seed, replicas)
        # Minibatch order has its own stream: reproducible, and saved with checkpoints.
        self.generator = torch.Generator().manual_seed(seed)
        # chosen at the first batch, whose size the auto rule needs
        self._loss: Losses | None = None
        # A categorical policy's loss in float32 has its gradient in closed form (same
        # loss, a fraction of the autograd graph's time on small minibatches): for rlfw's
        # own ``evaluate_actions`` only, so an agent that overrides it is still obeyed.
        # Not for a recurrent core, whose sequences outweigh the loss (CartPoleNoVel's LSTM
        # runs took the same time either way): its runs keep the bits they had.
        self._closed_form = (
            not self.recurrent
            and type(getattr(agent, "distribution", None)) is Categorical
            and getattr(type(agent), "evaluate_actions", None) is ActorCriticAgent.evaluate_actions
            and self.config.amp is None
        )

    def optimize(self, samples: Samples, itr: int) -> dict[str, float]:
        c = self.config
        lr = linear_schedule(c.learning_rate, itr, self.n_itr, c.anneal_lr)
        set_lr(self.optimizer, lr)
        clip = linear_schedule(c.clip, itr, self.n_itr, c.anneal_clip)
        reward = self.normalizers.reward(samples)
        batch_T = samples.reward.shape[0]
        observation = self.agent.training_observations(samples)
        info = agent_info(samples)
        self.agent.train_mode()
        vtrace = c.advantage == "vtrace"

        def targets() -> tuple[torch.Tensor, torch.Tensor]:
            """(advantages, value targets) ``[T * B]``; V-trace's from the weights now."""
            current = current_policy(self.agent, samples, observation) if vtrace else None
            return advantages(samples, c, reward, current)

        adv, ret = targets()
        # an agent's rows after it left its env (many agents) are no one's experience
        keep = present_rows(samples, self.recurrent, "PPO")
        columns: tuple[Any, ...]  # the observation (a tree) first, then tensors
        if self.recurrent:
            # Minibatches are sets of whole columns, each replayed from its stored state.
            columns = (
                observation,
                samples.action,
                info.logp,
                info.value,
                *self._as_columns(adv, ret, batch_T),
                samples.episode_start,
            )
            initial_state = cast(torch.Tensor, samples.agent_state)[0]  # a recurrent agent's
            n, per = samples.reward.shape[1], max(1, c.minibatch_size // batch_T)
        else:
            columns = (
                tree_map(lambda x: x.flatten(0, 1), observation),
                samples.action.flatten(0, 1),
                info.logp.flatten(),
                info.value.flatten(),
                *self._as_columns(adv, ret, batch_T),
            )
            columns = kept(columns, keep)
            n, per = len(columns[2]), c.minibatch_size
        mb = min(per, n)
        if self._loss is None:
            n_steps = self.n_itr * c.epochs * math.ceil(n / mb)
            self._loss = compile_loss(self._losses, c.compile, self.agent.model, n_steps)
        clip_t = torch.tensor(clip)  # a tensor: a compiled loss need not recompile per value
        totals = torch.zeros(len(STATS), dtype=torch.float64)
        grad_norms = 0.0
        n_updates = 0
        # each epoch's gather reuses the last one's memory
        shuffled: list[Any] = [None] * len(columns)
        for epoch in range(c.epochs):
            if vtrace and epoch > 0:  # the targets of the weights this epoch starts from
                adv, ret = targets()
                new = kept(self._as_columns(adv, ret, batch_T), keep)
                columns = (*columns[:4], *new, *columns[6:])
            order = torch.randperm(n, generator=self.generator)
            for start in range(0, n, mb):
                if self.recurrent:
                    cols = order[start : start + mb]
                    minibatch = [tree_take(x, cols, dim=1) for x in columns[:-1]]
                    sequence: tuple[torch.Tensor, ...] = (initial_state[cols], columns[-1][:, cols])
                else:
                    if start == 0:  # one gather per tensor and epoch, then free slices
                        shuffled = [tree_take(x, order, out=o) for x, o in zip(columns, shuffled)]
                    minibatch = [tree_index(x, slice(start, start + mb)) for x in shuffled]
                    sequence = ()
                stats, grad_norm = self._minibatch_step(*minibatch, clip_t, *sequence)
                totals += stats
                grad_norms += grad_norm
                n_updates += 1
        self.normalizers.after_update(self.agent, samples)
        out = {f"train/{k}": v / n_updates for k, v in zip(STATS, totals.tolist())}
        out["train/grad_norm"] = grad_norms / n_updates
        out.update(
            {
                "train/learning_rate": lr,
                "train/clip_range": clip,
                "train/n_updates": float(n_updates),
                "train/explained_variance": explained_variance(
                    *kept((info.value.flatten(), ret), keep)
                ),
            }
        )
        return out

    def _as_columns(
        self, adv: torch.Tensor, ret: torch.Tensor, batch_T: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``[T * B]`` targets as the minibatch columns hold them: ``[T, B]`` for a
        recurrent agent (whole columns), flat otherwise."""
        if self.recurrent:
            return adv.view(batch_T, -1), ret.view(batch_T, -1)
        return adv, ret

    def _minibatch_step(
        self,
        obs: Observation | EncodedObservations,
        action: torch.Tensor,
        old_logp: torch.Tensor,
        old_value: torch.Tensor,
        adv: torch.Tensor,
        ret: torch.Tensor,
        clip: torch.Tensor,
        *sequence: torch.Tensor,
    ) -> tuple[torch.Tensor, float]:
        """One gradient step; returns (the ``STATS`` as a tensor, the gradient norm)."""
        loss_fn = cast(Losses, self._loss)  # chosen by ``optimize`` before its first step
        if self.config.amp == "bf16":
            with torch.autocast(action.device.type, torch.bfloat16):
                loss, stats = loss_fn(obs, action, old_logp, old_value, adv, ret, clip, *sequence)
            loss, stats = loss.float(), stats.float()
        else:  # no autocast context at all: entering a disabled one costs ~10 us a step
            loss, stats = loss_fn(obs, action, old_logp, old_value, adv, ret, clip, *sequence)
        return stats, gradient_step(self.optimizer, self.flat, loss, self.config.max_grad_norm)

    def _losses(
        self,
        obs: Observation | EncodedObservations,
        action: torch.Tensor,
        old_logp: torch.Tensor,
        old_value: torch.Tensor,
        adv: torch.Tensor,
        ret: torch.Tensor,
        clip: torch.Tensor,
        initial_state: torch.Tensor | None = None,
        episode_start: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(the loss to minimize, the ``STATS``) of a minibatch: the part ``compile``
        compiles (forward, loss and, through autograd, their backward). A recurrent
        agent's minibatch is ``[T, columns]`` sequences from ``initial_state``."""
        c = self.config
        sequence = () if initial_state is None else (initial_state, episode_start)
        if self._closed_form and not torch.compiler.is_compiling():
            # a compiled loss fuses the generic ops itself
            logits, value = self.agent.evaluate_params(obs, *sequence)
            return categorical_ppo_loss(
                logits.flatten(0, -2),
                value.flatten(),
                action.flatten(),
                old_logp.flatten(),
                old_value.flatten(),
                adv.flatten(),
                ret.flatten(),
                clip,
                c,
            )
        logp, entropy, value = self.agent.evaluate_actions(obs, action, *sequence)
        logp, entropy, value = logp.flatten(), entropy.flatten(), value.flatten()
        old_logp, old_value = old_logp.flatten(), old_value.flatten()
        adv, ret = adv.flatten(), ret.flatten()
        if c.normalize_advantage and len(adv) > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        log_ratio = logp - old_logp
        ratio = log_ratio.exp()
        policy_loss = -torch.min(adv * ratio, adv * ratio.clamp(1 - clip, 1 + clip)).mean()
        if c.value_clip is not None:
            clipped = old_value + (value - old_value).clamp(-c.value_clip, c.value_clip)
            value_loss = (clipped - ret).pow(2)
            if c.value_clip_form == "max":
                value_loss = torch.max((value - ret).pow(2), value_loss)
            value_loss = value_loss.mean()
        else:
            value_loss = (value - ret).pow(2).mean()
        entropy_mean = entropy.mean()
        loss = policy_loss + c.value_coef * value_loss - c.entropy_coef * entropy_mean
        with torch.no_grad():
            approx_kl = ((ratio - 1) - log_ratio).mean()  # Schulman's low-variance estimator
            clip_fraction = ((ratio - 1).abs() > clip).float().mean()
            # Summed as tensors: one host read per batch, not five per minibatch.
            stats = torch.stack([policy_loss, value_loss, entropy_mean, approx_kl, clip_fraction])
        return loss, stats

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.generator.set_state(state["generator"])
