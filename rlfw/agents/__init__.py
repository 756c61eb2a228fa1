"""Agents: a model plus an action distribution, behind the ``Agent`` protocol."""

from rlfw.agents.actor_critic import ActorCriticAgent, distribution_for
from rlfw.agents.base import Agent, AgentStep, ModelAgent
from rlfw.agents.distributions import Categorical, DiagGaussian

__all__ = [
    "ActorCriticAgent",
    "Agent",
    "AgentStep",
    "Categorical",
    "DiagGaussian",
    "ModelAgent",
    "distribution_for",
]
