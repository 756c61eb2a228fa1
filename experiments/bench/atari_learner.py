"""The Nature-CNN PPO update on a 1,024-step Pong batch (the Atari preset: 8 envs x 128
steps, its epochs and minibatches), with each option that can speed it up, in one
run: median seconds per update, interleaved repeats, each as a ratio to plain eager
(contiguous NCHW, no compile, float32), which was the framework's update before these
options. bf16 AMP is the algorithm's own ``ppo.amp`` (the preset's, on from 2026-12-03);
every other variant runs float32.
Also the sampler's batched inference (8 observations) per layout and grad mode.

bf16 AMP runs on the CPU too (fast where the CPU has AMX or AVX512-BF16). On a GPU
(``--device cuda``) it adds compile + bf16 and pinned, non-blocking host-to-device copies.

    python experiments/bench/atari_learner.py [--repeats 3] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import numpy as np
import torch

from rlfw.agents import ActorCriticAgent
from rlfw.agents.distributions import Categorical
from rlfw.algos import PPO
from rlfw.buffers import tree_map
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.models.actor_critic import CnnActorCritic
from rlfw.samplers.base import allocate_samples

ENV, OBS_SHAPE, N_ACTIONS, T, B = "ALE/Pong-v5", (4, 84, 84), 6, 128, 8


def make_agent(channels_last: bool, device: str) -> ActorCriticAgent:
    torch.manual_seed(0)
    model = CnnActorCritic(OBS_SHAPE, N_ACTIONS, channels_last=channels_last)
    return ActorCriticAgent(model, Categorical(N_ACTIONS), gym.spaces.Discrete(N_ACTIONS), device)


def make_batch(agent: ActorCriticAgent):
    space = gym.spaces.Box(0, 255, OBS_SHAPE, np.uint8)
    samples = allocate_samples(agent, space, T, B)
    rng = np.random.default_rng(0)
    samples.observation.copy_(
        torch.from_numpy(rng.integers(0, 256, samples.observation.shape, dtype=np.uint8))
    )
    samples.action.copy_(torch.from_numpy(rng.integers(0, N_ACTIONS, (T, B))))
    samples.agent_info.logp.fill_(-np.log(N_ACTIONS))
    samples.agent_info.value.copy_(torch.from_numpy(rng.standard_normal((T, B)).astype(np.float32)))
    samples.reward.copy_(torch.from_numpy(rng.choice([-1.0, 0.0, 1.0], (T, B)).astype(np.float32)))
    return samples


class Variant:
    """One set of options: its agent, PPO, batch and a timed ``update()``."""

    def __init__(
        self,
        name: str,
        channels_last: bool = False,
        compile: bool = False,
        optimizer: str = "fused",
        device: str = "cpu",
        amp: bool = False,
        pinned: bool = False,
    ):
        self.name, self.device, self.pinned = name, device, pinned
        self.agent = make_agent(channels_last, device)
        config = apply_overrides(RunConfig(algo="ppo", env=ENV), preset("ppo", ENV)).ppo
        config.compile, config.amp = compile, "bf16" if amp else None
        self.ppo = PPO(config)
        self.ppo.initialize(self.agent, n_itr=10_000)
        if optimizer == "foreach":
            self.ppo.optimizer = torch.optim.Adam(
                [self.ppo.flat.flat],
                lr=config.learning_rate,
                eps=config.optimizer_eps,
                foreach=True,
            )
        self.host = make_batch(make_agent(False, "cpu"))
        if pinned:
            self.host = tree_map(lambda x: x.pin_memory(), self.host)
        self.times: list[float] = []

    def update(self) -> float:
        start = time.perf_counter()
        samples = _to_device(self.host, self.device, non_blocking=self.pinned)
        self.ppo.optimize(samples, 1)
        if self.device != "cpu":
            torch.cuda.synchronize()
        return time.perf_counter() - start


def _to_device(samples, device: str, non_blocking: bool):
    if device == "cpu":
        return samples
    return tree_map(lambda x: x.to(device, non_blocking=non_blocking), samples)


def inference_rate(channels_last: bool, mode: str, device: str, seconds: float) -> float:
    agent = make_agent(channels_last, device)
    obs = torch.randint(0, 256, (B, *OBS_SHAPE), dtype=torch.uint8)
    noise = np.random.default_rng(0).random(B).astype(np.float32)
    step = agent.step.__wrapped__  # the forward without its own no_grad: we choose the mode
    context = torch.inference_mode if mode == "inference_mode" else torch.no_grad
    with context():
        for _ in range(10):
            step(agent, obs, noise)
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            step(agent, obs, noise)
            calls += 1
    return calls / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--inference-seconds", type=float, default=2.0)
    args = parser.parse_args()
    dev = args.device
    specs = [
        ("eager, NCHW (before)", {}),
        ("channels-last", dict(channels_last=True)),
        ("compile", dict(compile=True)),
        ("channels-last + compile", dict(channels_last=True, compile=True)),
        ("channels-last, foreach Adam", dict(channels_last=True, optimizer="foreach")),
        # CPUs with AMX or AVX512-BF16 (this machine's Xeon has both) run bf16 convs fast
        ("channels-last + bf16 AMP", dict(channels_last=True, amp=True)),
    ]
    if dev != "cpu":
        specs += [
            (
                "channels-last + compile + bf16 AMP",
                dict(channels_last=True, compile=True, amp=True),
            ),
            (
                "... + pinned non-blocking copies",
                dict(channels_last=True, compile=True, amp=True, pinned=True),
            ),
        ]
    variants, first = [], {}
    for name, options in specs:
        variant = Variant(name, device=dev, **options)
        first[name] = variant.update()  # warm-up; includes compiling
        variants.append(variant)
    for _ in range(args.repeats):  # interleaved: machine noise hits every variant alike
        for variant in variants:
            variant.times.append(variant.update())
    base = statistics.median(variants[0].times)
    print(
        f"\nPPO update, Nature CNN, batch {T * B} ({dev}, {torch.get_num_threads()} "
        f"threads), median of {args.repeats}"
    )
    print(f"| {'options':<38} | {'s/update':>8} | {'speed-up':>8} | {'first update s':>14} |")
    print(f"|{'-' * 40}|{'-' * 10}|{'-' * 10}|{'-' * 16}|")
    for v in variants:
        med = statistics.median(v.times)
        print(f"| {v.name:<38} | {med:>8.2f} | {base / med:>7.2f}x | {first[v.name]:>14.1f} |")
    if dev == "cpu":
        print("GPU-only options (compile + bf16, pinned non-blocking copies): not in a CPU run")
    print(f"\nSampler inference, batch {B} ({dev}): forward passes/s")
    rates = {
        (cl, mode): inference_rate(cl, mode, dev, args.inference_seconds)
        for cl in (False, True)
        for mode in ("no_grad", "inference_mode")
    }
    ref = rates[(False, "no_grad")]
    for (cl, mode), rate in rates.items():
        print(
            f"  {'channels-last' if cl else 'NCHW':<14} {mode:<15} {rate:>8,.0f}/s "
            f"{rate / ref:>6.2f}x"
        )


if __name__ == "__main__":
    main()
