"""Pieces the policy-gradient algorithms share: config checks, advantages (GAE or
V-trace), diagnostics."""

from __future__ import annotations

from typing import Any, Protocol, cast

import torch

from rlfw.agents.actor_critic import ActorCriticAgent
from rlfw.agents.base import ModelAgent
from rlfw.algos.optim import OPTIMIZERS, Replicas
from rlfw.algos.pg.gae import generalized_advantages
from rlfw.algos.pg.vtrace import vtrace
from rlfw.buffers import AgentInfo, Samples, tree_map, tree_take
from rlfw.models.normalize import RewardScaler

# "gae": advantages from the sampling-time values, as if the batch were the learner's own;
# "vtrace": IMPALA's off-policy targets from the learner's current policy and values
ADVANTAGE_ESTIMATORS = ("gae", "vtrace")


class PgConfig(Protocol):
    """The settings every policy-gradient config (``PPOConfig``, ``A2CConfig`` and the
    V-trace ones built on them) has."""

    learning_rate: float
    optimizer: str
    optimizer_eps: float
    gamma: float
    gae_lambda: float
    value_coef: float
    max_grad_norm: float | None
    normalize_reward: bool
    reward_clip: float
    advantage: str
    vtrace_rho: float
    vtrace_c: float

    def validate(self) -> None: ...


def require_vtrace(config: PgConfig, algo: str, instead: str) -> None:
    """``ValueError`` unless ``config`` estimates with V-trace: ``algo`` is ``instead``
    on V-trace targets, and ``instead`` is the way to GAE."""
    if config.advantage != "vtrace":
        raise ValueError(
            f"{type(config).__name__}.advantage = {config.advantage!r} is invalid: {algo} "
            f"is {instead} on "
            f"V-trace targets and takes 'vtrace' (for GAE use --algo {instead})"
        )


def agent_info(samples: Samples) -> AgentInfo:
    """The batch's per-step info as an actor-critic agent records it (log-probs, values)."""
    return cast(AgentInfo, samples.agent_info)


def present_rows(samples: Samples, recurrent: bool, algo: str) -> torch.Tensor | None:
    """The flat ``[T * B]`` indices of the rows whose agent was in its env (``valid``), or
    None when every row was (one-agent envs; many agents all present): the rows a learner
    keeps, after advantages computed over whole columns. A recurrent learner replays whole
    columns and cannot drop rows: ``ValueError`` when one must go."""
    if samples.valid is None or bool(samples.valid.all()):
        return None
    if recurrent:
        raise ValueError(
            f"{algo} with a recurrent core got a batch in which agents left their env before "
            "the others; it replays whole columns and cannot leave those rows out yet: use a "
            "feed-forward agent (recurrent=none) for this env"
        )
    return torch.nonzero(samples.valid.flatten()).flatten()


def kept(rows: tuple[Any, ...], keep: torch.Tensor | None) -> tuple[Any, ...]:
    """Each tree of flat rows at ``keep`` (``present_rows``); all of them where None."""
    return rows if keep is None else tuple(tree_take(x, keep) for x in rows)


def explained_variance(pred: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var[target - pred] / Var[target]: 1 is perfect, 0 no better than a constant."""
    var = target.var()
    return float("nan") if var == 0 else float(1 - (target - pred).var() / var)


def common_checks(config: PgConfig) -> dict[str, tuple[object, bool, str]]:
    """Checks every policy-gradient config shares (see ``check_config``)."""
    c = config
    return dict(
        learning_rate=(c.learning_rate, c.learning_rate > 0, "must be > 0"),
        optimizer=(c.optimizer, c.optimizer in OPTIMIZERS, f"one of {OPTIMIZERS}"),
        gamma=(c.gamma, 0 <= c.gamma <= 1, "must be in [0, 1]"),
        gae_lambda=(c.gae_lambda, 0 <= c.gae_lambda <= 1, "must be in [0, 1]"),
        max_grad_norm=(
            c.max_grad_norm,
            c.max_grad_norm is None or c.max_grad_norm > 0,
            "None or > 0",
        ),
        reward_clip=(c.reward_clip, c.reward_clip > 0, "must be > 0"),
        optimizer_eps=(c.optimizer_eps, c.optimizer_eps > 0, "must be > 0"),
        value_coef=(c.value_coef, c.value_coef >= 0, "must be >= 0"),
        advantage=(
            c.advantage,
            c.advantage in ADVANTAGE_ESTIMATORS,
            f"one of {ADVANTAGE_ESTIMATORS}",
        ),
        vtrace_rho=(c.vtrace_rho, c.vtrace_rho > 0, "must be > 0 (V-trace's ρ̄)"),
        vtrace_c=(c.vtrace_c, c.vtrace_c > 0, "must be > 0 (V-trace's c̄)"),
    )


def advantages(
    samples: Samples,
    config: PgConfig,
    reward: torch.Tensor | None = None,
    current: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and value targets of a ``Samples`` batch, flattened to ``[T * B]``
    (``reward``: the batch's rewards as the learner sees them, if not the raw ones):
    GAE's, or with ``config.advantage == "vtrace"`` V-trace's from ``current``, the
    learner's (log-prob of each action taken, value) ``[T, B]`` (``current_policy``)."""
    reward = samples.reward if reward is None else reward
    if config.advantage == "vtrace":
        if current is None:
            raise ValueError("V-trace needs the learner's current log-probs and values")
        logp, value = current
        adv, ret = vtrace(
            reward,
            value,
            agent_info(samples).logp,
            logp,
            samples.terminated,
            samples.truncated,
            samples.bootstrap_value,
            config.gamma,
            config.gae_lambda,
            config.vtrace_rho,
            config.vtrace_c,
        )
        return adv.flatten(), ret.flatten()
    adv, ret = generalized_advantages(
        reward,
        agent_info(samples).value,
        samples.terminated,
        samples.truncated,
        samples.bootstrap_value,
        config.gamma,
        config.gae_lambda,
    )
    return adv.flatten(), ret.flatten()


def current_policy(
    agent: ActorCriticAgent, samples: Samples, observation: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """The learner's current log-prob of each action taken and value, ``[T, B]``, without
    gradient (V-trace's π and V): ``observation`` as ``agent.training_observations`` gives
    it; a recurrent agent replays each column from its stored state."""
    shape = samples.reward.shape
    with torch.no_grad():
        if samples.agent_state is not None:
            logp, _, value = agent.evaluate_actions(
                observation, samples.action, samples.agent_state[0], samples.episode_start
            )
        else:
            logp, _, value = agent.evaluate_actions(
                tree_map(lambda x: x.flatten(0, 1), observation), samples.action.flatten(0, 1)
            )
    return logp.reshape(shape), value.reshape(shape)


class BatchNormalizers:
    """What PPO and A2C normalize per batch: rewards scaled by the return's running std
    (``config.normalize_reward``) before the update, the agent's observation statistics
    (if its model normalizes) after it, so a batch is learned from with the statistics
    it was sampled with. With ``replicas`` every rank adds every rank's batch, in rank
    order: the statistics, like the weights, are the same bits on all ranks."""

    def __init__(self, config: PgConfig, replicas: Replicas | None = None):
        gather = None if replicas is None else replicas.all_gather
        self.rewards = (
            RewardScaler(config.gamma, config.reward_clip, gather)
            if config.normalize_reward
            else None
        )
        self.gather = gather

    def reward(self, samples: Samples) -> torch.Tensor:
        if self.rewards is None:
            return samples.reward
        return self.rewards(samples.reward, samples.done)

    def after_update(self, agent: ModelAgent, samples: Samples) -> None:
        if not agent.per_batch_statistics:
            return  # nothing to gather for: no statistics, or the sampler's per step
        observation = samples.observation
        gather = self.gather
        if gather is not None:
            observation = tree_map(lambda x: gather(x.contiguous()), observation)
        agent.update_normalization(observation)

    def state_dict(self) -> dict[str, Any] | None:
        return None if self.rewards is None else self.rewards.state_dict()

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        if self.rewards is not None and state is not None:
            self.rewards.load_state_dict(state)
