"""Generalized advantage estimation over ``[T, B]`` samples (Schulman et al., 2016)."""

from __future__ import annotations

import numpy as np
import torch


def generalized_advantages(
    reward: torch.Tensor,
    value: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    bootstrap_value: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), each ``[T, B]``.

    The successor value of step t is ``value[t+1]`` while the episode continues inside the
    batch; ``bootstrap_value[t]`` (V of the true final observation) after a truncation or at
    the batch's last step; and 0 after a termination. The λ-recursion stops at any episode
    end, so nothing leaks across episodes.
    """
    r = reward.numpy()
    v = value.detach().float().numpy()
    term = terminated.numpy()
    ends = term | truncated.numpy()
    next_value = np.empty_like(v)
    next_value[:-1] = np.where(ends[:-1], bootstrap_value[:-1].numpy(), v[1:])
    next_value[-1] = bootstrap_value[-1].numpy()
    next_value[term] = 0.0
    delta = r + gamma * next_value - v
    carry = gamma * lam * (~ends)
    adv = np.zeros_like(v)
    running = np.zeros(v.shape[1], dtype=v.dtype)
    for t in range(len(v) - 1, -1, -1):
        running = delta[t] + carry[t] * running
        adv[t] = running
    advantages = torch.from_numpy(adv)
    return advantages, advantages + value.detach().float()
