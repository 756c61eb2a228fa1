"""The rollout loop: a group of env slots, their noise streams, an agent, and the buffer
columns they fill. The serial sampler runs one; each parallel-CPU worker runs its own."""

from __future__ import annotations

from typing import Any

from rlfw.agents.base import Agent, reset_states
from rlfw.buffers import Samples
from rlfw.buffers.tree import numpy_views, tree_assign, tree_stack, tree_unbind
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.samplers.machinery.bootstrap import bootstrap_batch_end, bootstrap_truncated
from rlfw.samplers.machinery.env_group import EnvGroup
from rlfw.samplers.machinery.noise import SlotNoise
from rlfw.utils.seeding import ACTION_NOISE


class Collector:
    """Fills ``buf`` (this collector's ``[T, b]`` columns) with ``T`` steps per call."""

    def __init__(self, group: EnvGroup, agent: Agent, buf: Samples, seed: int):
        self.group, self.agent, self.buf = group, agent, buf
        # numpy views of the columns: a numpy row copy costs a fraction of a torch indexed
        # assignment, and these run once per step.
        self.rows = numpy_views(buf)
        group.reset()  # the group's next_obs is the current observation from here on
        self.noise = SlotNoise.for_agent(agent, seed, ACTION_NOISE, group.slots)
        self.state = agent.initial_state(len(group.slots))  # each slot's recurrent state

    def collect(self) -> list[EpisodeInfo]:
        buf, rows, agent, group = self.buf, self.rows, self.agent, self.group
        agent.sample_mode()
        episodes: list[EpisodeInfo] = []
        buf.bootstrap_value.zero_()
        noise = self.noise.draw_batch(len(buf.reward))
        observation = tree_unbind(buf.observation)  # torch rows, for the agent
        state = self.state
        for t in range(len(buf.reward)):
            tree_assign(rows.observation, t, group.result.next_obs)
            if rows.valid is not None:
                rows.valid[t] = group.result.present
            tree_assign(rows.agent_state, t, state)
            # per-step statistics take the row first (a sampler whose collectors see
            # only part of a row refuses such an agent)
            agent.observe(observation[t])
            step = agent.step(observation[t], noise[t], group.slots, state)
            state = step.state
            tree_assign(rows.action, t, step.action)
            tree_assign(rows.agent_info, t, step.info)
            result = group.step(agent.env_action(step.action))
            rows.reward[t] = result.reward
            rows.terminated[t] = result.terminated
            rows.truncated[t] = result.truncated
            if result.final_obs:
                idx = sorted(result.final_obs)
                final = tree_stack([result.final_obs[i] for i in idx])
                bootstrap_truncated(
                    buf, t, idx, final, agent, None if state is None else state[idx]
                )
            if state is not None:
                reset_states(state, result.terminated | result.truncated)
            episodes.extend(result.episodes)
        self.state = state
        bootstrap_batch_end(buf, group.result.next_obs, agent, state)
        return episodes

    def state_dict(self) -> dict[str, Any]:
        return {
            "group": self.group.state_dict(),
            "noise": self.noise.state(),
            "agent_state": None if self.state is None else self.state.clone(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.group.load_state_dict(state["group"])
        self.noise.set_state(state["noise"])
        if state.get("agent_state") is not None:
            self.state = state["agent_state"].clone()
