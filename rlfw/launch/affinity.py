"""Which cores each rank's learner and sampler workers use, and how many torch threads
each learner gets: one readable plan per machine, from psutil and the GPUs present.

The usable cores (the process's affinity mask, not the machine's count) are grouped by
physical core, split evenly between the ranks on this machine, and inside a rank's share
sampler workers take one physical core each before any takes a hyperthread sibling. The
learner's torch threads are the share's physical cores: sampling and learning alternate
in the sync runner, so they can use the same cores. A plan that puts more workers than
cores on a rank, or more ranks than physical cores on the machine, says so in
``warnings`` (printed at start); nothing is oversubscribed silently.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil
import torch

from rlfw.runfolder.files import write_json


@dataclass(frozen=True)
class Machine:
    """The cores and GPUs this process can use."""

    usable: tuple[int, ...]  # logical cores in the affinity mask
    physical: tuple[tuple[int, ...], ...]  # usable cores grouped by physical core
    logical_count: int  # on the whole machine
    physical_count: int
    gpus: int
    busy: float = 0.0  # other runnable threads when detected

    @classmethod
    def detect(cls) -> "Machine":
        try:
            usable = tuple(sorted(psutil.Process().cpu_affinity()))
        except (AttributeError, NotImplementedError):  # macOS has no affinity
            usable = tuple(range(psutil.cpu_count() or 1))
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        return cls(
            usable,
            _group_by_physical_core(usable),
            psutil.cpu_count() or len(usable),
            psutil.cpu_count(logical=False) or len(usable),
            gpus,
            _runnable_others(),
        )


def _runnable_others(samples: int = 5) -> float:
    """Threads of other processes running or ready to run now: the median over a few reads
    of Linux's /proc/loadavg (its running count includes the reading thread itself), 0
    elsewhere. The load averages would still count work that ended a minute ago."""
    counts = []
    for _ in range(samples):
        try:
            with open("/proc/loadavg") as f:
                counts.append(int(f.read().split()[3].split("/")[0]) - 1)
        except (OSError, IndexError, ValueError):
            return 0.0
        time.sleep(0.002)
    return float(sorted(counts)[len(counts) // 2])


def _group_by_physical_core(usable: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Hyperthread siblings together (Linux sysfs); one group per core elsewhere."""
    groups: dict[str, list[int]] = {}
    for cpu in usable:
        path = f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"
        try:
            with open(path) as f:
                key = f.read().strip()
        except OSError:
            key = str(cpu)
        groups.setdefault(key, []).append(cpu)
    return tuple(tuple(g) for g in sorted(groups.values()))


@dataclass
class RankAffinity:
    """One rank's share of the machine."""

    local_rank: int
    cores: list[int]  # logical cores of the share
    torch_threads: int  # learner intra-op threads (the share's physical cores)
    worker_cores: list[int]  # the core of each sampler worker, in worker order
    gpu: int | None  # cuda index of this rank's model, None: on CPU


@dataclass
class AffinityPlan:
    machine: Machine
    n_workers: int  # sampler workers (or ALE threads) of each rank (rank 0's)
    ranks: list[RankAffinity]
    warnings: list[str] = field(default_factory=list)

    def for_rank(self, local_rank: int) -> RankAffinity:
        return self.ranks[local_rank]

    def describe(self) -> str:
        m = self.machine
        lines = [
            f"affinity: {len(m.usable)} usable of {m.logical_count} logical cores "
            f"({m.physical_count} physical), {m.gpus} GPU(s); {len(self.ranks)} rank(s) "
            f"on this machine, {self.n_workers} sampler worker(s) each"
        ]
        for r in self.ranks:
            gpu = f", model on cuda:{r.gpu}" if r.gpu is not None else ""
            workers = ", ".join(f"w{i}->{c}" for i, c in enumerate(r.worker_cores)) or "none"
            lines.append(
                f"  local rank {r.local_rank}: cores {_ranges(r.cores)}, learner "
                f"{r.torch_threads} torch thread(s){gpu}; workers {workers}"
            )
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, run_dir: str) -> str:
        os.makedirs(run_dir, exist_ok=True)
        path = os.path.join(run_dir, "affinity.json")
        write_json(path, self.to_dict())
        return path


def plan_affinity(
    n_workers: int | None,
    local_world_size: int = 1,
    use_gpus: bool = False,
    machine: Machine | None = None,
    max_workers: int | None = None,
) -> AffinityPlan:
    """Split ``machine`` (default: this one) between ``local_world_size`` ranks with
    ``n_workers`` sampler workers each (None: one per core of the rank's share, at most
    ``max_workers``); ``use_gpus``: one GPU per rank."""
    if local_world_size < 1 or (n_workers is not None and n_workers < 0):
        raise ValueError(
            f"need local_world_size >= 1 and n_workers >= 0, got {local_world_size} and {n_workers}"
        )
    machine = machine or Machine.detect()
    groups, warnings = list(machine.physical), []
    if local_world_size > len(groups):
        warnings.append(
            f"{local_world_size} ranks on {len(groups)} usable physical core(s): "
            "ranks share cores and slow each other down"
        )
    if use_gpus and local_world_size > machine.gpus:
        warnings.append(f"{local_world_size} ranks on {machine.gpus} GPU(s): ranks share GPUs")
    ranks = []
    for r in range(local_world_size):
        share = _share(groups, r, local_world_size)
        # one worker per physical core first, then the hyperthread siblings
        order = [g[i] for i in range(max(len(g) for g in share)) for g in share if i < len(g)]
        n = n_workers if n_workers is not None else min(len(order), max_workers or len(order))
        workers = [order[w % len(order)] for w in range(n)]
        if n > len(order):
            warnings.append(
                f"local rank {r}: {n} sampler workers on {len(order)} "
                "core(s): more workers than cores, they time-share"
            )
        gpu = (r % machine.gpus) if use_gpus and machine.gpus else None
        ranks.append(RankAffinity(r, sorted(c for g in share for c in g), len(share), workers, gpu))
    return AffinityPlan(machine, len(ranks[0].worker_cores), ranks, warnings)


# Below this many parameters a network's products are too small for a second torch thread
# to pay much: alone, one thread took the same time on PPO CartPole and 6-11% longer on R2D1
# CartPoleNoVel and DQN MinAtar; beside a second run on 2 cores, two threads each spun while
# waiting on each other (R2D1 12x slower each), one thread each kept 0.95x or better
# (the retired experiments/bench/side_by_side.py, its finding in
# docs/notes/2026-12-07-retired-investigation-scripts.md).
SMALL_NETWORK_PARAMS = 1_000_000


def learner_threads(model: torch.nn.Module | None, planned: int, chosen: int | None = None) -> int:
    """The learner process's torch threads: ``chosen`` (the run's ``torch_threads``) when
    set, else one for a network under ``SMALL_NETWORK_PARAMS`` parameters, else
    ``planned`` (the affinity plan's, or the caller's; also for an agent without a
    ``model``). A function of the configuration and
    the network only, never of the load: the thread count can change a run's bits."""
    if chosen is not None:
        return chosen
    if model is None:  # an agent without a model attribute (a plugin's): its caller's
        return planned
    size = sum(p.numel() for p in model.parameters())
    return 1 if size < SMALL_NETWORK_PARAMS else planned


def busy_machine_warning(machine: Machine, learner_threads: int) -> str | None:
    """Why ``learner_threads`` torch threads will be slow here, when other work (another
    run, most often) already keeps some of the machine's usable cores busy; else None.

    The threads are not cut automatically: their count can change a run's floating-point
    results, and a run's numbers must not depend on what else the machine was doing."""
    idle = max(1, round(len(machine.usable) - machine.busy))
    if machine.busy < 1 or learner_threads <= idle:
        return None
    return (
        f"the machine is already busy ({machine.busy:.0f} other thread(s) running on "
        f"{len(machine.usable)} usable cores) and the learner has {learner_threads} torch "
        f"threads for its network of a million parameters or more: they will wait on each "
        f"other; start each run with --set torch_threads={idle} (the thread count is part "
        "of the run's configuration: it can change its bits)"
    )


def _share(groups: list[tuple[int, ...]], rank: int, n_ranks: int) -> list[tuple[int, ...]]:
    """A contiguous, even slice of the physical cores; a core of its own per rank at
    least (shared round-robin when there are more ranks than cores)."""
    if n_ranks >= len(groups):
        return [groups[rank % len(groups)]]
    lo, hi = rank * len(groups) // n_ranks, (rank + 1) * len(groups) // n_ranks
    return groups[lo:hi]


def apply_affinity(share: RankAffinity, pin: bool, set_threads: bool = True) -> None:
    """With ``set_threads``, give this process's learner its torch threads; with ``pin``,
    keep it on its cores (the sampler pins its workers to ``share.worker_cores``)."""
    if set_threads:
        torch.set_num_threads(share.torch_threads)
    if pin:
        psutil.Process().cpu_affinity(share.cores)


def _ranges(cores: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    out, start = [], None
    for i, c in enumerate(cores):
        if start is None:
            start = c
        if i + 1 == len(cores) or cores[i + 1] != c + 1:
            out.append(f"{start}-{c}" if c != start else f"{c}")
            start = None
    return ",".join(out)
