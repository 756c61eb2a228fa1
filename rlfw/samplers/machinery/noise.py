"""Action noise from one RNG stream per env slot (see ``rlfw.agents.distributions``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from rlfw.utils.seeding import slot_generator

if TYPE_CHECKING:
    from rlfw.agents.base import Agent


class SlotNoise:
    """Draws per-step noise for a set of env slots, each slot from its own generator keyed by
    (seed, purpose, slot), so results do not depend on which process owns which slot.

    ``hold`` > 1 hands each fresh draw out for that many consecutive steps (gSDE's noise
    matrix, resampled every ``sde_sample_freq`` steps): step ``i`` of the stream, counted
    from its start, gets fresh draw ``i // hold``, wherever batches begin and end."""

    def __init__(
        self,
        seed: int,
        purpose: int,
        slots: Sequence[int],
        shape: tuple[int, ...],
        kind: str,
        hold: int = 1,
    ):
        if kind not in ("uniform", "normal"):
            raise ValueError(f"noise kind {kind!r} unknown; choose 'uniform' or 'normal'")
        if isinstance(hold, bool) or not isinstance(hold, int) or hold < 1:
            raise ValueError(f"noise hold must be an int >= 1 (steps per fresh draw), got {hold!r}")
        self.generators = [slot_generator(seed, purpose, slot) for slot in slots]
        self.shape = tuple(shape)
        self.kind = kind
        self.hold = hold
        self.steps = 0  # steps handed out so far (counted for ``hold`` > 1 only)
        self.held: np.ndarray | None = None  # the draw in use, ``[n_slots, *shape]``

    @classmethod
    def for_agent(cls, agent: Agent, seed: int, purpose: int, slots: Sequence[int]) -> SlotNoise:
        """The stream of the noise ``agent.step`` takes (its shape, kind and hold)."""
        return cls(seed, purpose, slots, agent.noise_shape, agent.noise_kind, agent.noise_hold)

    def _draws(self, shape: tuple[int, ...]) -> list[np.ndarray]:
        """One draw of ``shape`` from each slot's generator, in slot order."""
        if self.kind == "uniform":
            return [g.random(shape) for g in self.generators]
        return [g.standard_normal(shape) for g in self.generators]

    def draw(self) -> np.ndarray:
        """``[n_slots, *shape]`` float32."""
        if self.hold > 1:
            step: np.ndarray = self.draw_batch(1)[0]  # numpy types a row of an array as Any
            return step
        return np.asarray(self._draws(self.shape), dtype=np.float32)

    def draw_batch(self, n_steps: int) -> np.ndarray:
        """``[n_steps, n_slots, *shape]`` float32: the next ``n_steps`` draws of every slot,
        the same numbers (and generator states after) as ``n_steps`` calls of ``draw``,
        at one call per slot instead of one per slot and step."""
        if self.hold == 1:
            return np.stack(self._draws((n_steps,) + self.shape), axis=1).astype(np.float32)
        periods = np.arange(self.steps, self.steps + n_steps) // self.hold
        last_drawn = (self.steps - 1) // self.hold  # -1 before the first step
        n_fresh = int(periods[-1] - last_drawn) if n_steps else 0
        fresh = np.stack(self._draws((n_fresh,) + self.shape), axis=1).astype(np.float32)
        held = self.held if self.held is not None else np.zeros(fresh.shape[1:], np.float32)
        pool = np.concatenate([held[None], fresh])  # pool[k]: the draw of period last_drawn+k
        out = pool[periods - last_drawn]
        self.held, self.steps = pool[-1], self.steps + n_steps
        return out

    def state(self) -> list[Mapping[str, Any]] | dict[str, Any]:
        """What ``set_state`` restores: the generators' states, and for ``hold`` > 1 the
        step count and the draw in use."""
        generators = [g.bit_generator.state for g in self.generators]
        if self.hold == 1:
            return generators
        state: dict[str, Any] = {"generators": generators, "steps": self.steps}
        if self.held is not None:
            state["held"] = self.held
        return state

    def set_state(self, state: list[Mapping[str, Any]] | dict[str, Any]) -> None:
        held = isinstance(state, dict)
        if held != (self.hold > 1):
            raise ValueError(
                f"noise state {'with' if held else 'without'} held draws does not "
                f"fit a stream with hold={self.hold}: the run that saved it "
                "sampled its noise differently"
            )
        saved = state["generators"] if isinstance(state, dict) else state
        for g, s in zip(self.generators, saved):
            g.bit_generator.state = s
        if isinstance(state, dict):
            self.steps = int(state["steps"])
            self.held = np.asarray(state["held"], np.float32) if "held" in state else None
