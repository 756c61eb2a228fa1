"""Runners compose algorithm, agent and sampler."""
from rlfw.runners.concurrent import ConcurrentRunner
from rlfw.runners.sync import RunSchedule, SyncRunner, TrainResult

__all__ = ["ConcurrentRunner", "RunSchedule", "SyncRunner", "TrainResult"]
