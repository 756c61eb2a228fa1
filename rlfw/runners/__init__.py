"""Runners compose algorithm, agent and sampler."""
from rlfw.runners.sync import RunSchedule, SyncRunner, TrainResult

__all__ = ["RunSchedule", "SyncRunner", "TrainResult"]
