"""Samplers: all fill the same ``[T, B]`` ``Samples`` buffer."""
from rlfw.samplers.base import EpisodeInfo, Sampler
from rlfw.samplers.serial import SerialSampler, allocate_samples

__all__ = ["EpisodeInfo", "Sampler", "SerialSampler", "allocate_samples"]
