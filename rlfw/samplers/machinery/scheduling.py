"""Dynamic scheduling (GA3C): pick the number of sampler workers by hill-climbing on measured
env steps per second, before training, so that the run itself has one fixed configuration
(the deterministic runners need that) which ``config.json`` records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from rlfw.samplers.machinery.throughput import measure_steps_per_second
from rlfw.samplers.machinery.workers import usable_cpus

if TYPE_CHECKING:
    from rlfw.agents.base import Agent
    from rlfw.samplers.base import Sampler


@dataclass(frozen=True)
class Trial:
    n_workers: int
    steps_per_second: float


def worker_candidates(batch_B: int, groups: int = 1, cap: int | None = None) -> list[int]:
    """Worker counts that split ``batch_B`` envs evenly into ``groups`` equal worker groups,
    up to ``cap`` (default: twice the usable cores: env stepping that waits on I/O can use
    more workers than cores)."""
    cap = 2 * len(usable_cpus()) if cap is None else cap
    out = [n for n in range(1, min(batch_B, cap) + 1) if batch_B % n == 0 and n % groups == 0]
    if not out:
        raise ValueError(
            f"no worker count splits batch_B={batch_B} evenly within {cap} "
            "workers" + (f" (multiples of {groups} only)" if groups > 1 else "")
        )
    return out


def hill_climb(
    measure: Callable[[int], float],
    candidates: Sequence[int],
    on_trial: Callable[[Trial], None] = lambda trial: None,
) -> tuple[int, list[Trial]]:
    """From the smallest candidate, move to the next larger one while throughput improves
    (GA3C's rule for its actor and predictor counts); returns the best and every trial."""
    trials: list[Trial] = []
    best: Trial | None = None
    for n in candidates:
        trial = Trial(n, measure(n))
        trials.append(trial)
        on_trial(trial)
        if best is not None and trial.steps_per_second <= best.steps_per_second:
            break  # past the peak
        best = trial
    assert best is not None
    return best.n_workers, trials


def tune_n_workers(
    make_sampler: Callable[[int], Sampler],
    agent: Agent,
    candidates: Sequence[int],
    seconds: float = 2.0,
    on_trial: Callable[[Trial], None] = lambda t: None,
) -> tuple[int, list[Trial]]:
    """Hill-climb ``n_workers`` for the sampler ``make_sampler(n)`` builds, stepping it with
    ``agent`` for about ``seconds`` per trial (each trial's sampler is closed after)."""

    def measure(n: int) -> float:
        return measure_steps_per_second(make_sampler(n), agent, seconds)

    return hill_climb(measure, candidates, on_trial)
