"""Runners compose algorithm, agent and sampler: one skeleton (``Runner``), three kinds."""
from rlfw.runners.async_ import AsyncRunner
from rlfw.runners.base import Runner
from rlfw.runners.concurrent import ConcurrentRunner
from rlfw.runners.schedule import RunSchedule, TrainResult
from rlfw.runners.sync import SyncRunner
from rlfw.samplers.async_ import SamplerProcess  # where it lived before; a sampler now

__all__ = ["AsyncRunner", "ConcurrentRunner", "RunSchedule", "Runner", "SamplerProcess",
           "SyncRunner", "TrainResult"]
