"""Runners compose algorithm, agent and sampler: one skeleton (``Runner``), three kinds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlfw.runners.async_ import AsyncRunner
from rlfw.runners.base import Runner
from rlfw.runners.concurrent import ConcurrentRunner
from rlfw.runners.schedule import RunSchedule, TrainResult
from rlfw.runners.sync import SyncRunner

if TYPE_CHECKING:
    from rlfw.samplers.async_ import SamplerProcess

__all__ = ["AsyncRunner", "ConcurrentRunner", "RunSchedule", "Runner", "SyncRunner", "TrainResult"]


def __getattr__(name: str) -> type[SamplerProcess]:
    # SamplerProcess is a sampler (rlfw.samplers.async_); it lived here before.
    if name == "SamplerProcess":
        import warnings

        from rlfw.samplers.async_ import SamplerProcess

        warnings.warn(
            "rlfw.runners.SamplerProcess moved to rlfw.samplers.async_.SamplerProcess",
            DeprecationWarning,
            stacklevel=2,
        )
        return SamplerProcess
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
