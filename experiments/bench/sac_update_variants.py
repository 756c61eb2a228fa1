"""What compiling or bf16 autocast would buy SAC's update on the CPU, in one run.

SAC's networks at HalfCheetah's sizes (17 observations, 6 actions, SB3's 256x256), a
minibatch of 256: the critics' forward and backward, then the actor's sample, the frozen
critics on its actions and the actor's backward (the part of an update that is not the
optimizer steps or the target). Three variants, interleaved repeats, best of each: eager
float32, ``torch.compile`` (inductor, one graph for the critics' loss and one for the
actor's sample), and eager under bf16 autocast. Prints ms per update part and the ratio
to eager.

    python experiments/bench/sac_update_variants.py [--repeats 3] [--iters 300]
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

import gymnasium as gym
import numpy as np
import torch

from rlfw.agents.qpg_agent import QpgAgent
from rlfw.envs import EnvSpaces

OBS, ACT, BATCH = 17, 6, 256


def update_part(compiled: bool, bf16: bool) -> Callable[[], None]:
    """One critic and one actor forward-backward on fixed random data."""
    spaces = EnvSpaces(
        gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32),
        gym.spaces.Box(-1, 1, (ACT,), np.float32),
    )
    agent = QpgAgent.build(spaces, "squashed_gaussian", "sac", hidden=(256, 256))
    critics, actor = agent.critics, agent.actor
    generator = torch.Generator().manual_seed(0)
    obs = torch.randn(BATCH, OBS, generator=generator)
    action = torch.rand(BATCH, ACT, generator=generator) * 2 - 1
    target = torch.randn(BATCH, generator=generator)
    normal = torch.randn(BATCH, ACT, generator=generator)

    def critic_loss(obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return 0.5 * (critics(obs, action).float() - target).pow(2).mean(-1).sum()

    sample = actor.sample
    if compiled:
        critic_loss = torch.compile(critic_loss, dynamic=False, fullgraph=True)
        sample = torch.compile(sample, dynamic=False, fullgraph=True)

    def run() -> None:
        with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            loss = critic_loss(obs, action)
        critics.zero_grad(set_to_none=True)
        loss.backward()
        critics.requires_grad_(False)
        with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            pi_action, logp = sample(obs, normal)
            actor_loss = (0.2 * logp.float() - critics(obs, pi_action).min(0).values.float()).mean()
        actor.zero_grad(set_to_none=True)
        actor_loss.backward()
        critics.requires_grad_(True)

    return run


def ms_per_call(fn: Callable[[], None], iters: int) -> float:
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--iters", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(1)
    variants = {
        "eager": update_part(False, False),
        "compiled": update_part(True, False),
        "bf16": update_part(False, True),
    }
    for fn in variants.values():  # warm up (and compile) before anything is timed
        for _ in range(20):
            fn()
    best = {name: float("inf") for name in variants}
    for _ in range(args.repeats):
        for name, fn in variants.items():
            best[name] = min(best[name], ms_per_call(fn, args.iters))
    print(f"SAC update part, {OBS} obs, {ACT} actions, 256x256, batch {BATCH}, one thread")
    print("| variant | ms | / eager |\n|---|---:|---:|")
    for name, ms in best.items():
        print(f"| {name} | {ms:.2f} | {ms / best['eager']:.2f}x |")


if __name__ == "__main__":
    main()
