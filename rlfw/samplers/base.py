"""What every sampler promises: the ``Sampler`` protocol and the records it returns."""
from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

from rlfw.buffers import Samples


class EpisodeInfo(NamedTuple):
    """One finished *game* episode (all lives, unclipped reward) of one env slot."""

    ret: float
    length: int
    slot: int


@runtime_checkable
class Sampler(Protocol):
    """Steps ``batch_B`` envs for ``batch_T`` steps per call into one ``[T, B]`` buffer.

    Lifecycle: construct with the env factory and sizes, ``initialize(agent)``, then
    ``obtain_samples(itr)`` repeatedly, ``evaluate(n)`` whenever, ``close()`` (also via
    ``with``). ``state_dict``/``load_state_dict`` capture everything needed for a resumed run
    to continue bitwise: env states, current observations and RNG streams.
    """

    batch_T: int
    batch_B: int

    def initialize(self, agent) -> Samples: ...

    def obtain_samples(self, itr: int) -> tuple[Samples, list[EpisodeInfo]]: ...

    def evaluate(self, n_episodes: int, greedy: bool = True) -> list[EpisodeInfo]: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...

    def close(self) -> None: ...


def check_positive(**sizes: int) -> None:
    """Raise ``ValueError`` for the first size that is not a positive int."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
