"""Test doubles: counting and failing environments, counting and constant agents."""
from rlfw.testing.agents import (ConstantActionAgent, CountingAgent, ElementwiseActorCritic,
                                 elementwise_gaussian_agent)
from rlfw.testing.envs import (ContinuousCountingEnv, CountingEnv, FrameCountingEnv, KillOnceEnv,
                               NonFiniteRewardEnv, RaisingEnv, SelfKillingEnv, SleepyEnv,
                               stacked_frame_counting_env)

__all__ = ["ConstantActionAgent", "ContinuousCountingEnv", "CountingAgent", "CountingEnv",
           "ElementwiseActorCritic", "elementwise_gaussian_agent",
           "FrameCountingEnv", "KillOnceEnv", "NonFiniteRewardEnv", "RaisingEnv",
           "SelfKillingEnv", "SleepyEnv", "stacked_frame_counting_env"]
