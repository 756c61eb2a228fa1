"""V-trace over ``[T, B]`` samples (Espeholt et al., 2018, "IMPALA", section 4.1): value
targets and policy-gradient advantages for a batch sampled by a policy μ older than the
policy π being learned."""

from __future__ import annotations

import numpy as np
import torch


def vtrace(
    reward: torch.Tensor,
    value: torch.Tensor,
    behaviour_logp: torch.Tensor,
    target_logp: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    bootstrap_value: torch.Tensor,
    gamma: float,
    lam: float,
    rho_bar: float,
    c_bar: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, value targets ``v_s``), each ``[T, B]``.

    With ρ_t = min(ρ̄, π(a_t|x_t) / μ(a_t|x_t)) and c_t = λ min(c̄, π/μ) (the paper's
    remark 1 puts λ in the traces), δ_t = ρ_t (r_t + γ V(x_{t+1}) - V(x_t)) and

        v_s - V(x_s) = δ_s + γ c_s (v_{s+1} - V(x_{s+1})),
        advantage_s  = ρ_s (r_s + γ v_{s+1} - V(x_s)).

    ``value`` is V(x_t) under the learner's current weights. The successor of step t is
    step t+1 while the episode continues inside the batch; after a truncation and at the
    batch's last step it is ``bootstrap_value[t]`` (V of the true next observation, which
    the batch does not hold: the sampling weights' value), standing for both V(x_{t+1})
    and v_{t+1}; after a termination it is 0. The recursion stops at every episode end.
    On-policy (π = μ) with ρ̄, c̄ ≥ 1 the targets are GAE's λ-returns.
    """
    r = reward.numpy()
    v = value.detach().float().numpy()
    ratio = np.exp(target_logp.detach().float().numpy() - behaviour_logp.float().numpy())
    rho = np.minimum(rho_bar, ratio)
    c = lam * np.minimum(c_bar, ratio)
    term = terminated.numpy()
    ends = term | truncated.numpy()
    bootstrap = bootstrap_value.numpy()
    # the successor's V: the next row's inside an episode, else the bootstrap (0 if terminal)
    next_value = np.empty_like(v)
    next_value[:-1] = np.where(ends[:-1], bootstrap[:-1], v[1:])
    next_value[-1] = bootstrap[-1]
    next_value[term] = 0.0
    delta = rho * (r + gamma * next_value - v)
    carry = gamma * c * (~ends)
    # v_s - V(x_s), backwards; at an episode end (and the batch's end) the carry is 0
    correction = np.zeros_like(v)
    running = np.zeros(v.shape[1], dtype=v.dtype)
    for t in range(len(v) - 1, -1, -1):
        running = delta[t] + carry[t] * running
        correction[t] = running
    targets = v + correction
    # v_{s+1}: the next row's target inside an episode, else the same successor as above
    next_target = next_value.copy()
    next_target[:-1] = np.where(ends[:-1], next_value[:-1], targets[1:])
    advantages = rho * (r + gamma * next_target - v)
    return torch.from_numpy(advantages.astype(v.dtype)), torch.from_numpy(targets)
