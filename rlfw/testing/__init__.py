"""Test doubles: counting and failing environments, counting and constant agents."""
from rlfw.testing.agents import ConstantActionAgent, CountingAgent
from rlfw.testing.envs import (ContinuousCountingEnv, CountingEnv, FrameCountingEnv, KillOnceEnv,
                               NonFiniteRewardEnv, RaisingEnv, SelfKillingEnv, SleepyEnv,
                               stacked_frame_counting_env)

__all__ = ["ConstantActionAgent", "ContinuousCountingEnv", "CountingAgent", "CountingEnv",
           "FrameCountingEnv", "KillOnceEnv", "NonFiniteRewardEnv", "RaisingEnv",
           "SelfKillingEnv", "SleepyEnv", "stacked_frame_counting_env"]
