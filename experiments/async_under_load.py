"""An async DQN run ends with the same bits alone and beside a CPU-bound process.

The async runner fixes which weights sample each batch and which batches each minibatch
may draw from, so the machine's load (which shifts when the sampler and the learner run)
must change nothing the run computes. This runs the DQN CartPole preset under the async
runner twice, once alone and once beside a process that keeps a core busy, and compares
every tensor of the final agent and optimizer bit for bit. The test suite checks the same
at a few thousand steps (``tests/test_async.py``); this is the full size.

    python experiments/async_under_load.py [--steps 100000] [--prioritized]
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

import torch

from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.runners import RunSchedule


def spin(seconds: float) -> None:
    """Keep one core busy for ``seconds``."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def final_tensors(steps: int, prioritized: bool) -> tuple[dict[str, torch.Tensor], float]:
    """The agent's and the optimizer's tensors after an async DQN CartPole run, and its
    wall-clock seconds."""
    config = apply_overrides(RunConfig(algo="dqn", seed=0), preset("dqn", "CartPole-v1"))
    config.runner = "async"
    if prioritized:
        apply_overrides(config, {"dqn": {"prioritized": True}})
    config.schedule = RunSchedule(
        n_steps=steps, eval_every=steps // 4, eval_episodes=5, log_every=steps // 10
    )
    start = time.perf_counter()
    with build_runner(config, None, progress=False, stdout=False) as runner:
        runner.train()
        out = {f"agent/{k}": v.clone() for k, v in runner.agent.state_dict().items()}
        state = runner.algo.state_dict()["optimizer"]["state"]
        for i, s in state.items():
            for k, v in s.items():
                if isinstance(v, torch.Tensor):
                    out[f"optimizer/{i}/{k}"] = v.clone()
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--prioritized", action="store_true")
    args = parser.parse_args()
    alone, alone_s = final_tensors(args.steps, args.prioritized)
    busy = multiprocessing.get_context("spawn").Process(target=spin, args=(3600.0,))
    busy.start()
    try:
        loaded, loaded_s = final_tensors(args.steps, args.prioritized)
    finally:
        busy.terminate()
        busy.join()
    differ = [k for k in alone if not torch.equal(alone[k], loaded[k])]
    print(
        f"async dqn CartPole-v1, {args.steps:,} steps"
        + (", prioritized" if args.prioritized else "")
        + f": alone {alone_s:.0f} s, beside a busy process {loaded_s:.0f} s; "
        + (
            f"{len(differ)} of {len(alone)} tensors differ: {differ[:4]}"
            if differ
            else f"all {len(alone)} tensors bitwise equal"
        )
    )


if __name__ == "__main__":
    main()
