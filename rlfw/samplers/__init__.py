"""Samplers: all fill the same ``[T, B]`` ``Samples`` buffer; swap one for another freely."""
from rlfw.samplers.base import EpisodeInfo, Sampler
from rlfw.samplers.native_atari import NativeAtariSampler
from rlfw.samplers.parallel_cpu import ParallelCpuSampler
from rlfw.samplers.parallel_gpu import AlternatingSampler, ParallelGpuSampler
from rlfw.samplers.base import allocate_samples
from rlfw.samplers.serial import SerialSampler
from rlfw.samplers.workers import WorkerError

__all__ = ["AlternatingSampler", "EpisodeInfo", "NativeAtariSampler", "ParallelCpuSampler",
           "ParallelGpuSampler", "Sampler", "SerialSampler", "WorkerError", "allocate_samples"]
