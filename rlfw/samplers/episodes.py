"""The record of one finished episode, as samplers and evaluation report it."""

from __future__ import annotations

from typing import NamedTuple


class EpisodeInfo(NamedTuple):
    """One finished *game* episode (all lives, unclipped reward) of one env slot.
    ``truncated``: the episode was cut by a step cap before the game ended. ``success``:
    the env's ``info["is_success"]`` at the episode's last step (goal-conditioned envs;
    None where the env reports none)."""

    ret: float
    length: int
    slot: int
    truncated: bool = False
    success: float | None = None
