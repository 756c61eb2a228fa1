"""Runners compose algorithm, agent and sampler."""
from rlfw.runners.async_ import AsyncRunner, SamplerProcess
from rlfw.runners.concurrent import ConcurrentRunner
from rlfw.runners.sync import RunSchedule, SyncRunner, TrainResult

__all__ = ["AsyncRunner", "ConcurrentRunner", "SamplerProcess", "RunSchedule", "SyncRunner", "TrainResult"]
