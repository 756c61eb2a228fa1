"""Agents: a model plus an action distribution."""
from rlfw.agents.actor_critic import ActorCriticAgent, AgentStep, distribution_for
from rlfw.agents.distributions import Categorical, DiagGaussian

__all__ = ["ActorCriticAgent", "AgentStep", "Categorical", "DiagGaussian", "distribution_for"]
