"""The run's checkpoints across ranks: rank 0 writes one file holding every rank's state
and reads it back, each rank getting the shared part plus its own."""

from __future__ import annotations

from typing import Any, Callable, cast

from rlfw.runfolder.checkpoint import list_checkpoints, load_newest_valid, save_checkpoint
from rlfw.utils.distributed import RankGroup


class RunCheckpoints:
    """Checkpoints of the run in ``log_dir`` (none without one), the newest ``keep`` kept.

    ``save`` takes what all ranks share (written once, from rank 0) and what differs per
    rank (each rank's sampler, algorithm and RNG state, gathered to rank 0); ``load_newest``
    returns this rank's view of the newest checkpoint that loads."""

    def __init__(
        self,
        log_dir: str | None,
        ranks: RankGroup | None,
        keep: int,
        say: Callable[[str], None],
        trust: bool = False,
    ):
        self.log_dir, self.ranks, self.keep, self.say = log_dir, ranks, keep, say
        self.pickles = "trust" if trust else "verify"  # trust: --trust-checkpoint
        self.chief = ranks is None or ranks.is_chief
        self.world_size = 1 if ranks is None else ranks.world_size

    def exist(self) -> bool:
        return self.log_dir is not None and bool(list_checkpoints(self.log_dir))

    def newest(self) -> str | None:
        """The newest checkpoint's path, or None."""
        found = list_checkpoints(self.log_dir) if self.log_dir is not None else []
        return found[-1] if found else None

    def newest_note(self) -> str:
        """'; the newest checkpoint is ...' for error messages, or ''."""
        newest = self.newest()
        return f"; the newest checkpoint is {newest}" if newest else ""

    def save(
        self, env_steps: int, shared: Callable[[], dict[str, Any]], own: dict[str, Any]
    ) -> str | None:
        """Gather every rank's ``own`` state; rank 0 writes them with ``shared()`` and gets
        the checkpoint's path (the other ranks ``None``)."""
        if self.log_dir is None:
            return None
        others: list[dict[str, Any]] = []
        if self.ranks is not None:
            gathered = self.ranks.gather(own, "checkpoint state")
            if not self.chief:
                return None
            others = cast(list[dict[str, Any]], gathered)[1:]  # the chief gets every rank's
        state = {**shared(), **own}
        if others:
            state["ranks"] = others  # ranks 1.. (rank 0's state is the top level)
        return save_checkpoint(self.log_dir, env_steps, state, self.keep)

    def load_newest(self) -> dict[str, Any]:
        """This rank's view of the newest checkpoint that loads: the shared part plus its
        own state; refused if it was written by another number of ranks."""
        state = self._load_chief() if self.chief else None
        if self.ranks is None:
            return cast(dict[str, Any], state)  # one rank: the chief, which loaded it
        parts = None
        if state is not None:  # the chief
            shared = {k: v for k, v in state.items() if k != "ranks"}
            parts = [shared] + [{**shared, **own} for own in state.get("ranks", [])]
        mine: dict[str, Any] = self.ranks.scatter(parts, "the checkpoint")
        return mine

    def _load_chief(self) -> dict[str, Any]:
        # only resumes and restarts load, and both need a log_dir (Runner checks)
        log_dir = cast(str, self.log_dir)
        path, state, skipped = load_newest_valid(log_dir, self.pickles)
        for bad, why in skipped:
            self.say(f"skipped damaged checkpoint {bad}: {why}")
        saved_world = 1 + len(state.get("ranks", []))
        if saved_world != self.world_size:
            raise ValueError(
                f"checkpoint {path} holds {saved_world} rank(s) but this run has "
                f"{self.world_size}; resume with the same number of ranks"
            )
        return state
