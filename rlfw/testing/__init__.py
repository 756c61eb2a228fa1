"""Test doubles: counting and failing environments, a counting agent."""
from rlfw.testing.agents import CountingAgent
from rlfw.testing.envs import (ContinuousCountingEnv, CountingEnv, FrameCountingEnv, RaisingEnv,
                               SelfKillingEnv, stacked_frame_counting_env)

__all__ = ["ContinuousCountingEnv", "CountingAgent", "CountingEnv", "FrameCountingEnv",
           "RaisingEnv", "SelfKillingEnv", "stacked_frame_counting_env"]
