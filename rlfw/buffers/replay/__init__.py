"""Replay for off-policy algorithms, composed from storage, sampling rule and n-step view."""

from rlfw.buffers.replay.replay import (
    PrioritizedSampling,
    Replay,
    ReplayBatch,
    ReplayBuffer,
    ReplayWriter,
    UniformSampling,
)
from rlfw.buffers.replay.storage import FrameStorage, RowStorage
from rlfw.buffers.replay.sum_tree import SumTree

__all__ = [
    "FrameStorage",
    "PrioritizedSampling",
    "Replay",
    "ReplayBatch",
    "ReplayBuffer",
    "ReplayWriter",
    "RowStorage",
    "SumTree",
    "UniformSampling",
]
