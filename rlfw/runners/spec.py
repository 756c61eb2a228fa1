"""What declares a runner kind to the rest of rlfw (``RunnerSpec``), and rlfw's own kinds;
``rlfw.registry`` collects them."""

from __future__ import annotations

from dataclasses import dataclass

from rlfw.runners.async_ import AsyncRunner
from rlfw.runners.base import Runner
from rlfw.runners.concurrent import ConcurrentRunner
from rlfw.runners.sync import SyncRunner


@dataclass(frozen=True)
class RunnerSpec:
    """A runner kind (a ``rlfw.runners.Runner`` subclass)."""

    name: str
    cls: type[Runner]
    summary: str = ""


SPECS = (
    RunnerSpec(
        "sync",
        SyncRunner,
        "sample, then learn; no policy lag, bitwise deterministic with every sampler",
    ),
    RunnerSpec(
        "concurrent",
        ConcurrentRunner,
        "HTS-RL: sampling overlaps learning, policy lag exactly one, "
        "deterministic (on-policy algorithms)",
    ),
    RunnerSpec(
        "async",
        AsyncRunner,
        "sampler in its own process, free-running (replay algorithms: shared "
        "replay with the replay ratio enforced)",
    ),
)
