"""Input checks shared by every part: each error names the bad value and what is allowed."""

from __future__ import annotations

from collections.abc import Iterable

import torch


def check_positive(**sizes: int) -> None:
    """Raise ``ValueError`` for the first size that is not a positive int."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def check_seed(seed: int) -> None:
    """A run seed: an int numpy's and torch's generators both take, 0 to 2**32 - 1."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an integer from 0 to 2**32 - 1, got {seed!r}")


def check_seeds(seeds: Iterable[int]) -> list[int]:
    """The seeds of a study (a sweep's, a benchmark's), each a run seed, none twice: a
    repeated seed is the same run counted twice in its statistics."""
    listed = list(seeds)
    for seed in listed:
        check_seed(seed)
    if not listed or len(set(listed)) < len(listed):
        raise ValueError(f"seeds must be one or more different seeds, got {listed}")
    return listed


def check_config(name: str, **checks: tuple[object, bool, str]) -> None:
    """Raise ``ValueError`` for the first field whose check failed, with what is allowed."""
    for field, (value, ok, allowed) in checks.items():
        if not ok:
            raise ValueError(f"{name}.{field} = {value!r} is invalid: {allowed}")


class NonFiniteError(FloatingPointError):
    """A NaN or infinite number where training cannot go on (loss, gradient, env output)."""


def check_finite(what: str, value: torch.Tensor) -> None:
    """Raise ``NonFiniteError`` naming ``what`` if ``value`` holds a NaN or an inf."""
    if not bool(torch.isfinite(value).all()):
        raise NonFiniteError(f"non-finite {what}: {value.flatten()[:8].tolist()}")
