"""Does the async runner at least match the sync runner? Env steps/s once learning runs.

Each case trains one preset twice in one sitting, under the sync runner and under the
async runner (the same sampler, the same replay ratio), and prints both learning-phase
rates (env steps/s from the first batch after ``learning_starts`` to the end) and their
ratio, with each run's achieved replay ratio. The async runner must gain (a core to spare
for the sampler) or at least hold even (issue 72: SAC once ran 4x slower async).

    python experiments/async_vs_sync.py [--cases sac-halfcheetah dqn-cartpole] [--steps N]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.runners import RunSchedule


@dataclass(frozen=True)
class Case:
    algo: str
    env: str
    steps: int  # learning steps measured, after learning_starts
    learning_starts: int  # the preset's, shortened where it would only add random steps
    sampler: str = "serial"


CASES = {
    # the preset's 10k random steps first would only add warm-up: 2k keep a full replay
    # minibatch meaningful and the run short
    "sac-halfcheetah": Case("sac", "HalfCheetah-v5", 3_000, 2_000),
    "sac-halfcheetah-cpu": Case("sac", "HalfCheetah-v5", 3_000, 2_000, sampler="cpu"),
    "dqn-cartpole": Case("dqn", "CartPole-v1", 20_000, 1_000),
}


class LearningClock:
    """Callback: the wall-clock time and env steps of each iteration."""

    def __init__(self) -> None:
        self.marks: list[tuple[float, float]] = []

    def on_iteration(self, metrics: dict[str, float]) -> None:
        self.marks.append((time.perf_counter(), metrics["env_steps"]))

    def rate_after(self, start_steps: int) -> float:
        """Env steps/s over the iterations past ``start_steps``."""
        after = [(t, s) for t, s in self.marks if s > start_steps]
        (t0, s0), (t1, s1) = after[0], after[-1]
        return (s1 - s0) / (t1 - t0)


def run(case: Case, runner: str, seed: int, handoff: int | None = None) -> dict[str, Any]:
    config = apply_overrides(
        RunConfig(algo=case.algo, env=case.env, seed=seed), preset(case.algo, case.env)
    )
    apply_overrides(
        config,
        {
            "runner": runner,
            "sampler": case.sampler,
            case.algo: {"learning_starts": case.learning_starts},
        },
    )
    if handoff is not None:
        config.async_handoff = handoff
    total = case.learning_starts + case.steps
    config.schedule = RunSchedule(n_steps=total, eval_every=None, log_every=total)
    clock = LearningClock()
    with build_runner(config, None, progress=False, stdout=False, callbacks=[clock]) as built:
        built.train()
        updates = built.algo.updates
        idle = dict(getattr(built, "idle", {}))
    return {
        "rate": clock.rate_after(case.learning_starts),
        "replay_ratio": updates / max(total - case.learning_starts, 1),
        "idle": idle,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=sorted(CASES))
    parser.add_argument("--steps", type=int, help="learning steps per run (default: the case's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--handoff", type=int, help="async_handoff (default: the runner's; 1: a handshake a batch)"
    )
    args = parser.parse_args()
    for name in args.cases:
        case = CASES[name]
        if args.steps:
            case = Case(case.algo, case.env, args.steps, case.learning_starts, case.sampler)
        sync = run(case, "sync", args.seed)
        asynchronous = run(case, "async", args.seed, args.handoff)
        idle = ", ".join(f"{k} idle {v:.0f} s" for k, v in asynchronous["idle"].items())
        print(
            f"{name} ({case.algo} {case.env}, {case.sampler} sampler, {case.steps:,} learning "
            f"steps, async_handoff {args.handoff or 'default'}): sync {sync['rate']:.1f} "
            "env steps/s (replay ratio "
            f"{sync['replay_ratio']:.2f}), async {asynchronous['rate']:.1f} (replay ratio "
            f"{asynchronous['replay_ratio']:.2f}; {idle}): async / sync "
            f"{asynchronous['rate'] / sync['rate']:.2f}x"
        )


if __name__ == "__main__":
    main()
