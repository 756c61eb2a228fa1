"""Would a sparse first layer speed up a network over one-hot features? MiniGrid's shape,
forward and backward of the actor-critic's two MLPs, one torch thread.

MiniGrid's 7x7x3 tile codes one-hot encode to 980 features (plus 4 for the direction), of
which 148 are hot in every row; rlfw's PPO learns with separate policy and value MLPs
(984 -> 64 -> 64 -> head) on minibatches of 64. Their first layers are the largest part
of a minibatch's arithmetic. Timed here, per minibatch (median of interleaved repeats):

- dense: as rlfw does it, the one-hot rows times each first layer (``nn.Linear``);
- fused: one 984 -> 128 layer, split into the two bodies (one pass over the features);
- gather forward: the first layers as sums of the hot rows of their transposed weights
  (``embedding_bag``), their weight gradients as a dense product with the one-hot rows;
- embedding_bag: forward and backward both through ``F.embedding_bag``.

    python experiments/bench/one_hot_layer.py [--repeats 5] [--calls 300]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

ROWS, WIDTH, HOT, HIDDEN = 64, 984, 148, 64


class HotRowsLinear(torch.autograd.Function):
    """``one_hot @ weight_t + bias`` with the forward as a sum of ``weight_t``'s hot rows."""

    @staticmethod
    def forward(ctx, positions, one_hot, weight_t, bias):  # type: ignore[override]
        ctx.save_for_backward(one_hot)
        return F.embedding_bag(positions, weight_t, mode="sum") + bias

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        (one_hot,) = ctx.saved_tensors
        return None, None, one_hot.t().mm(grad), grad.sum(0)


def body(out_dim: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, out_dim)
    )


def variants(positions: torch.Tensor, one_hot: torch.Tensor) -> dict[str, Callable[[], None]]:
    """Each variant's forward and backward of both MLPs, as a closure."""
    pi_first, v_first = nn.Linear(WIDTH, HIDDEN), nn.Linear(WIDTH, HIDDEN)
    pi_body, v_body = body(7), body(1)
    fused_first = nn.Linear(WIDTH, 2 * HIDDEN)
    pi_t = nn.Parameter(pi_first.weight.detach().t().contiguous())
    v_t = nn.Parameter(v_first.weight.detach().t().contiguous())
    pi_b, v_b = nn.Parameter(torch.zeros(HIDDEN)), nn.Parameter(torch.zeros(HIDDEN))

    def dense() -> None:
        (pi_body(pi_first(one_hot)).sum() + v_body(v_first(one_hot)).sum()).backward()

    def fused() -> None:
        pi_h, v_h = fused_first(one_hot).split(HIDDEN, dim=-1)
        (pi_body(pi_h).sum() + v_body(v_h).sum()).backward()

    def gather_forward() -> None:
        pi_h = HotRowsLinear.apply(positions, one_hot, pi_t, pi_b)
        v_h = HotRowsLinear.apply(positions, one_hot, v_t, v_b)
        (pi_body(pi_h).sum() + v_body(v_h).sum()).backward()

    def embedding_bag() -> None:
        pi_h = F.embedding_bag(positions, pi_t, mode="sum") + pi_b
        v_h = F.embedding_bag(positions, v_t, mode="sum") + v_b
        (pi_body(pi_h).sum() + v_body(v_h).sum()).backward()

    return {
        "dense": dense,
        "fused": fused,
        "gather forward": gather_forward,
        "embedding_bag": embedding_bag,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300, help="minibatches per timing")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    positions = torch.stack([torch.randperm(WIDTH)[:HOT] for _ in range(ROWS)])
    one_hot = torch.zeros(ROWS, WIDTH).scatter_(-1, positions, 1.0)
    runs = variants(positions, one_hot)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            for _ in range(20):  # warm-up: the first calls run slower
                run()
            start = time.perf_counter()
            for _ in range(args.calls):
                run()
            times[name].append((time.perf_counter() - start) / args.calls)
    base = statistics.median(times["dense"])
    print(f"## two MLPs {WIDTH}->{HIDDEN}->{HIDDEN}, minibatch {ROWS}, {HOT} hot features a row")
    print("| variant | us per minibatch (fwd + bwd) | / dense |")
    print("|---|---:|---:|")
    for name, spans in times.items():
        median = statistics.median(spans)
        print(f"| {name} | {median * 1e6:.0f} | {median / base:.2f}x |")


if __name__ == "__main__":
    main()
