"""Action noise from one RNG stream per env slot (see ``rlfw.agents.distributions``)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from rlfw.seeding import slot_generator


class SlotNoise:
    """Draws per-step noise for a set of env slots, each slot from its own generator keyed by
    (seed, purpose, slot), so results do not depend on which process owns which slot."""

    def __init__(self, seed: int, purpose: int, slots: Sequence[int], shape: tuple[int, ...],
                 kind: str):
        if kind not in ("uniform", "normal"):
            raise ValueError(f"noise kind {kind!r} unknown; choose 'uniform' or 'normal'")
        self.generators = [slot_generator(seed, purpose, slot) for slot in slots]
        self.shape = tuple(shape)
        self.kind = kind

    def _draws(self, shape: tuple[int, ...]) -> list:
        """One draw of ``shape`` from each slot's generator, in slot order."""
        if self.kind == "uniform":
            return [g.random(shape) for g in self.generators]
        return [g.standard_normal(shape) for g in self.generators]

    def draw(self) -> np.ndarray:
        """``[n_slots, *shape]`` float32."""
        return np.asarray(self._draws(self.shape), dtype=np.float32)

    def draw_batch(self, n_steps: int) -> np.ndarray:
        """``[n_steps, n_slots, *shape]`` float32: the next ``n_steps`` draws of every slot,
        the same numbers (and generator states after) as ``n_steps`` calls of ``draw``,
        at one call per slot instead of one per slot and step."""
        return np.stack(self._draws((n_steps,) + self.shape), axis=1).astype(np.float32)

    def state(self) -> list[dict]:
        return [g.bit_generator.state for g in self.generators]

    def set_state(self, states: list[dict]) -> None:
        for g, s in zip(self.generators, states):
            g.bit_generator.state = s
