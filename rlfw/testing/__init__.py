"""Test doubles: counting and failing environments."""
from rlfw.testing.envs import ContinuousCountingEnv, CountingEnv, RaisingEnv, SelfKillingEnv

__all__ = ["ContinuousCountingEnv", "CountingEnv", "RaisingEnv", "SelfKillingEnv"]
