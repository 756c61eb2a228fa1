"""Test doubles: counting and failing environments, counting and constant agents."""

from rlfw.testing.agents import (
    ConstantActionAgent,
    CountingAgent,
    CountingRecurrentAgent,
    ElementwiseActorCritic,
    ElementwiseRecurrentActorCritic,
    elementwise_gaussian_agent,
    elementwise_recurrent_agent,
)
from rlfw.testing.envs import (
    ContinuousCountingEnv,
    CountingEnv,
    CountMatchingEnv,
    FrameCountingEnv,
    GoalCountingEnv,
    KillOnceEnv,
    NestedCountingEnv,
    NonFiniteRewardEnv,
    RaisingEnv,
    SelfKillingEnv,
    SleepyEnv,
    TextLeafEnv,
    stacked_frame_counting_env,
)

__all__ = [
    "ConstantActionAgent",
    "ContinuousCountingEnv",
    "CountingAgent",
    "CountingEnv",
    "GoalCountingEnv",
    "NestedCountingEnv",
    "TextLeafEnv",
    "CountingRecurrentAgent",
    "CountMatchingEnv",
    "ElementwiseActorCritic",
    "ElementwiseRecurrentActorCritic",
    "elementwise_gaussian_agent",
    "elementwise_recurrent_agent",
    "FrameCountingEnv",
    "KillOnceEnv",
    "NonFiniteRewardEnv",
    "RaisingEnv",
    "SelfKillingEnv",
    "SleepyEnv",
    "stacked_frame_counting_env",
]
