"""The on-policy batch every sampler fills and PPO/A2C (and DQN's replay) read."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Union

import torch

from rlfw.buffers.tree import Tree, tree_assign, tree_index


class AgentInfo(NamedTuple):
    """What the agent adds to each step: log-prob of the action taken and the state value;
    with per-step observation statistics also the normalized observation the policy acted
    on (each step's statistics differ, so the learner must train on exactly these)."""

    logp: torch.Tensor
    value: torch.Tensor
    model_input: Optional[torch.Tensor] = None

    # ``buf[t, b]`` indexes every leaf rather than picking a field (methods, not
    # ``LeafIndexing``'s assigned: mypy reads any assignment in a NamedTuple body as a field).
    def __getitem__(self, index: Any) -> Tree:
        return tree_index(self, index)

    def __setitem__(self, index: Any, value: Tree) -> None:
        tree_assign(self, index, value)


class QInfo(NamedTuple):
    """What a Q-agent adds to each step: max_a Q(obs, a) at sampling time."""

    value: torch.Tensor

    def __getitem__(self, index: Any) -> Tree:
        return tree_index(self, index)

    def __setitem__(self, index: Any, value: Tree) -> None:
        tree_assign(self, index, value)


class PolicyInfo(NamedTuple):
    """What a Q-function policy-gradient agent (SAC, TD3, DDPG) keeps per step: nothing;
    its learner reads the replay's observations and actions only. (No leaves to index:
    write into it with ``tree_assign``.)"""


StepInfo = Union[AgentInfo, QInfo, PolicyInfo]


class Samples(NamedTuple):
    """``[T, B]`` on-policy samples.

    ``observation[t]`` is the observation the action ``action[t]`` was chosen on (after
    same-step reset it is the new episode's first observation). ``bootstrap_value[t]`` is
    V(true next observation) for steps whose successor is not ``observation[t+1]``: a
    truncated step (value of its real final observation, never the reset one) and the
    batch's last step. It is 0 on terminated steps, which never bootstrap.

    ``policy_version[t, b]`` is the number of updates the weights that chose ``action[t, b]``
    had seen; the runner stamps it (it alone knows), so an algorithm can measure its lag.

    ``agent_state[t, b]`` (recurrent agents; ``None`` otherwise) is the slot's recurrent
    state *before* step ``t``, already zeroed where ``t`` starts an episode: row 0 is where
    each column's sequence starts, and a learner re-runs the column from it, restarting at
    ``episode_start`` (the steps after a ``done``), exactly as it was sampled.

    ``final_observation[t, b]`` (agents with ``keeps_final_observation``; ``None``
    otherwise) is the true final observation of a truncated step ``t``, for learners that
    bootstrap from it with their own current networks (SAC, TD3, DDPG); such agents'
    batches leave ``bootstrap_value`` at 0. Rows of steps not truncated hold stale data.

    ``valid[t, b]`` (many-agent envs; ``None`` otherwise) is whether column ``b``'s agent
    was in its env at step ``t``: an agent that left before the others holds rows of zero
    observation and reward until the env resets, and learners leave them out of the loss.
    """

    observation: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    agent_info: StepInfo
    bootstrap_value: torch.Tensor
    policy_version: torch.Tensor | None = None
    agent_state: torch.Tensor | None = None
    final_observation: Any = None
    valid: torch.Tensor | None = None

    def __getitem__(self, index: Any) -> Tree:
        return tree_index(self, index)

    def __setitem__(self, index: Any, value: Tree) -> None:
        tree_assign(self, index, value)

    @property
    def done(self) -> torch.Tensor:
        return self.terminated | self.truncated

    @property
    def episode_start(self) -> torch.Tensor:
        """``[T, B]``: step ``t`` begins an episode after step ``t - 1`` ended; row 0 is all
        False (a column's first state, in ``agent_state[0]``, was reset when sampled)."""
        done = self.done
        start = torch.zeros_like(done)
        start[1:] = done[:-1]
        return start
