"""Test doubles: counting and failing environments, a counting agent."""
from rlfw.testing.agents import CountingAgent
from rlfw.testing.envs import ContinuousCountingEnv, CountingEnv, RaisingEnv, SelfKillingEnv

__all__ = ["ContinuousCountingEnv", "CountingAgent", "CountingEnv", "RaisingEnv",
           "SelfKillingEnv"]
