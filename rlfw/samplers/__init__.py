"""Samplers: all fill the same ``[T, B]`` ``Samples`` buffer; swap one for another freely."""

from rlfw.samplers.base import Sampler, SamplerBase, allocate_samples
from rlfw.samplers.episodes import EpisodeInfo
from rlfw.samplers.machinery.evaluation import EvalLimits
from rlfw.samplers.machinery.workers import WorkerError
from rlfw.samplers.native_atari import NativeAtariSampler
from rlfw.samplers.parallel_cpu import ParallelCpuSampler
from rlfw.samplers.parallel_gpu import AlternatingSampler, ParallelGpuSampler
from rlfw.samplers.queue import QueueSampler
from rlfw.samplers.serial import SerialSampler

__all__ = [
    "AlternatingSampler",
    "EpisodeInfo",
    "EvalLimits",
    "NativeAtariSampler",
    "ParallelCpuSampler",
    "ParallelGpuSampler",
    "QueueSampler",
    "Sampler",
    "SamplerBase",
    "SerialSampler",
    "WorkerError",
    "allocate_samples",
]
