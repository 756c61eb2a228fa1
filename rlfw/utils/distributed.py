"""Multi-process training on ``torch.distributed``: one learner replica and one sampler per
rank, launched by ``torchrun``.

Each rank samples its own experience (its env seeds and noise streams derive from the run
seed and its rank), computes its gradient, and the gradients are averaged with one
all-reduce over the flat gradient buffer per optimizer step. Every rank then applies the
same averaged gradient to the same weights, so the replicas stay bitwise identical without
ever sending weights after the first broadcast. Rank 0 alone logs, evaluates and writes
checkpoints; each checkpoint carries every rank's sampler, algorithm and RNG state so a
resume with the same world size continues bitwise.

Gradients travel over NCCL when the model is on a GPU (gloo when more ranks than GPUs share
a machine), gloo otherwise; the small control
messages (checkpoint state, the stop flag) always go over a gloo group, which works with
CPU objects whatever the gradient backend.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

# torch.distributed.nn (which torch._dynamo, loaded by torch.optim, imports) takes the default
# group as a default argument when first imported: imported after the group exists, it keeps
# the group alive, so destroy_process_group cannot stop its gloo threads; one of them that
# then frees a finished collective's tensors during interpreter shutdown needs the GIL, is
# killed for it, and the rank aborts ("terminate called without an active exception": seen
# in CI, reproduced with a core dump). Imported here, before any group, it keeps None.
import torch.distributed.nn  # noqa: F401

from rlfw.utils.seeding import derive_seed

# Seeds for ranks above 0 come from their own spawn key, far from the per-slot keys.
RANK_SEED_KEY = 1_000_003


class RankError(RuntimeError):
    """A collective operation failed: another rank stopped or could not be reached."""


@dataclass
class RankGroup:
    """This process's place in a multi-rank run and the collectives the runner needs."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    backend: str  # of the gradient all-reduce: 'gloo' or 'nccl'
    control: Any = None  # gloo group for objects; None: the default group

    @property
    def is_chief(self) -> bool:
        return self.rank == 0

    def _failed(self, what: str, err: BaseException) -> RankError:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return RankError(
            f"rank {self.rank} of {self.world_size}: {what} failed: another rank "
            f"stopped or cannot be reached (torchrun's failure summary names "
            f"it): {first}"
        )

    def average_gradient(self, grad: torch.Tensor) -> None:
        """``grad`` becomes the mean of every rank's ``grad``, identical bits on all ranks
        (the reduced buffer is the same on every rank, then divided the same way)."""
        try:
            dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        except RuntimeError as err:
            raise self._failed("the gradient all-reduce", err) from None
        grad.div_(self.world_size)

    def all_gather(self, rows: torch.Tensor) -> torch.Tensor:
        """Every rank's ``rows`` (same shape on each) concatenated in rank order."""
        parts = [torch.empty_like(rows) for _ in range(self.world_size)]
        try:
            dist.all_gather(parts, rows, group=self.control)
        except RuntimeError as err:
            raise self._failed("gathering batch statistics", err) from None
        return torch.cat(parts)

    def broadcast(self, obj: Any, what: str) -> Any:
        """Rank 0's ``obj`` on every rank."""
        box = [obj if self.is_chief else None]
        try:
            dist.broadcast_object_list(box, src=0, group=self.control)
        except RuntimeError as err:
            raise self._failed(f"broadcasting {what}", err) from None
        return box[0]

    def gather(self, obj: Any, what: str) -> list[Any] | None:
        """Every rank's ``obj`` in rank order on rank 0; None elsewhere."""
        out = [None] * self.world_size if self.is_chief else None
        try:
            dist.gather_object(obj, out, dst=0, group=self.control)
        except RuntimeError as err:
            raise self._failed(f"gathering {what}", err) from None
        return out

    def scatter(self, objs: list[Any] | None, what: str) -> Any:
        """Rank r gets ``objs[r]`` (given on rank 0)."""
        out = [None]
        try:
            dist.scatter_object_list(
                out, objs if self.is_chief else None, src=0, group=self.control
            )
        except RuntimeError as err:
            raise self._failed(f"scattering {what}", err) from None
        return out[0]

    def broadcast_agent(self, agent: Any) -> None:
        """Rank 0's weights into every rank's agent (the replicas start identical)."""
        state = self.broadcast(
            {k: v.cpu() for k, v in agent.state_dict().items()} if self.is_chief else None,
            "the initial weights",
        )
        if not self.is_chief:
            agent.load_state_dict(state)

    def seed(self, seed: int) -> int:
        """This rank's seed for env resets, action noise and minibatch draws: the run seed
        on rank 0 (a one-rank run equals a plain run), a derived one elsewhere."""
        return seed if self.rank == 0 else derive_seed(seed, RANK_SEED_KEY, self.rank)

    def close(self, finished: bool = False) -> None:
        """Leave the group and stop its threads. ``finished`` (this rank's run ended
        normally, so every rank's will): first wait for the others at a barrier, so no rank
        tears down its group while a peer is still in a collective with it."""
        if dist.is_initialized():
            if finished:
                dist.barrier()
            dist.destroy_process_group()
        # The group's worker threads stop only when its last reference goes: one left
        # here would outlive the interpreter (see the torch.distributed.nn import).
        self.control = None


def launched_by_torchrun() -> bool:
    """True when the environment holds a multi-rank launch (torchrun's variables)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init_from_environment(device: str, timeout_s: float = 1800.0) -> RankGroup | None:
    """Join the process group torchrun described in the environment (``RANK``,
    ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``...); None for a one-process run.

    NCCL carries gradients when ``device`` is a GPU (each rank on ``cuda:LOCAL_RANK``),
    gloo otherwise."""
    if not launched_by_torchrun():
        return None
    missing = [k for k in ("RANK", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise ValueError(
            f"WORLD_SIZE={os.environ['WORLD_SIZE']} but {', '.join(missing)} "
            "not set: launch multi-rank runs with torchrun (e.g. torchrun "
            "--nproc-per-node 2 -m rlfw train ...)"
        )
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    backend = "nccl" if torch.device(device).type == "cuda" else "gloo"
    if backend == "nccl":
        gpus = torch.cuda.device_count()
        if local_world > gpus:  # ranks share GPUs; NCCL refuses two ranks on one device
            backend = "gloo"
        torch.cuda.set_device(local_rank % gpus)
    if not dist.is_initialized():
        timeout = timedelta(seconds=timeout_s)
        store, _, _ = next(dist.rendezvous("env://", timeout=timeout))
        # torchrun's elastic restarts reuse its store: keys of the failed attempt (the old
        # ranks' addresses) would be read by the new one, so each attempt gets its prefix.
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        dist.init_process_group(
            backend,
            store=dist.PrefixStore(f"rlfw/attempt{attempt}", store),
            rank=rank,
            world_size=world,
            timeout=timeout,
        )
    control = dist.new_group(backend="gloo") if backend == "nccl" else None
    return RankGroup(rank, world, local_rank, local_world, backend, control)


def rank_device(device: str, ranks: RankGroup | None) -> str:
    """``cuda`` becomes ``cuda:LOCAL_RANK`` in a multi-rank run (one GPU per rank)."""
    if (
        ranks is None
        or torch.device(device).type != "cuda"
        or torch.device(device).index is not None
    ):
        return device
    return f"cuda:{ranks.local_rank}"
