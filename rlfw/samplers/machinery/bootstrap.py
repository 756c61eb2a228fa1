"""The one place where samplers write ``Samples.bootstrap_value``: V(true final obs) for
truncated steps and V(next obs) at the batch's open end; terminated steps keep 0. For an
agent that keeps final observations (``Samples.final_observation``) the truncated step's
observation is stored instead, and nothing is valued: its learner bootstraps later, with
its own networks."""

from __future__ import annotations

import numpy as np
import torch

from rlfw.agents.base import Agent, AgentState
from rlfw.buffers import Samples
from rlfw.buffers.tree import tree_assign


def bootstrap_truncated(
    buf: Samples,
    t: int,
    slots: np.ndarray | torch.Tensor | list[int],
    final_obs: np.ndarray | torch.Tensor,
    agent: Agent,
    state: AgentState = None,
) -> None:
    """Value the true final observations of the ``slots`` truncated at step ``t`` (callers
    skip steps where nothing was truncated); ``state``: those slots' recurrent states after
    step ``t``, before the reset."""
    if buf.final_observation is not None:
        tree_assign(buf.final_observation, (t, slots), final_obs)
        return
    buf.bootstrap_value[t, slots] = agent.value(final_obs, state).float().cpu()


def bootstrap_batch_end(
    buf: Samples, next_obs: np.ndarray | torch.Tensor, agent: Agent, state: AgentState = None
) -> None:
    """Value ``next_obs`` (from the slots' current recurrent ``state``) for slots whose last
    step did not end an episode (a truncated last step already holds the value of its own
    final observation). Not for an agent that keeps final observations: its replay reads
    the next observation from the next batch."""
    if buf.final_observation is not None:
        return
    last = buf.reward.shape[0] - 1
    open_end = ~(buf.terminated[last] | buf.truncated[last])
    if open_end.any():
        values = agent.value(next_obs, state).float().cpu()
        buf.bootstrap_value[last] = torch.where(open_end, values, buf.bootstrap_value[last])
