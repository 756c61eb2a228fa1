"""V-trace against values worked out by hand, its on-policy limit (GAE), and the V-trace
learners (APPO, IMPALA) on a lagged batch."""

import numpy as np
import pytest
import torch

from rlfw.algos.pg.gae import generalized_advantages
from rlfw.algos.pg.vtrace import vtrace


def columns(*cols, dtype=torch.float32):
    """``[T, B]`` from one list per column."""
    return torch.tensor(list(zip(*cols)), dtype=dtype)


def test_vtrace_by_hand_with_truncated_weights_a_termination_and_a_truncation():
    g = 0.5
    # column 0: no episode end, ratios π/μ = 2, 0.5, 1 (ρ̄ = c̄ = 1 truncate the 2);
    # column 1: terminated at t=1; column 2: truncated at t=0 (V of its final obs 4)
    reward = columns([1.0, 2.0, 3.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
    value = columns([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [2.0, 2.0, 2.0])
    behaviour = torch.zeros(3, 3)
    target = columns([np.log(2.0), np.log(0.5), 0.0], [0.0] * 3, [0.0] * 3)
    term = columns([0, 0, 0], [0, 1, 0], [0, 0, 0], dtype=torch.bool)
    trunc = columns([0, 0, 0], [0, 0, 0], [1, 0, 0], dtype=torch.bool)
    boot = columns([0.0, 0.0, 2.0], [0.0, 0.0, 5.0], [4.0, 0.0, 2.0])
    adv, vs = vtrace(reward, value, behaviour, target, term, trunc, boot, g, 1.0, 1.0, 1.0)
    # column 0: ρ = c = (1, 0.5, 1); successors' V (1, 1, 2)
    #   δ = ρ (r + γ V' - V) = (0.5, 0.75, 3)
    #   v - V: t2 = 3, t1 = 0.75 + γ c1 3 = 1.5, t0 = 0.5 + γ c0 1.5 = 1.25
    #   advantage = ρ (r + γ v' - V), v' = (2.5, 4, 2): (1.25, 1.5, 3)
    # column 1: successors' V (1, 0, 5); δ = (0.5, 0, 2.5); v - V = (0.5, 0, 2.5)
    #   v' = (1, 0, 5): advantage (0.5, 0, 2.5)
    # column 2: successors' V (4, 2, 2); δ = (0, -1, -1); v - V = (0, -1.5, -1)
    #   v' = (4, 1, 2): advantage (0, -1.5, -1)
    expected_vs = columns([2.25, 2.5, 4.0], [1.5, 1.0, 3.5], [2.0, 0.5, 1.0])
    expected_adv = columns([1.25, 1.5, 3.0], [0.5, 0.0, 2.5], [0.0, -1.5, -1.0])
    np.testing.assert_allclose(vs.numpy(), expected_vs.numpy(), rtol=1e-6)
    np.testing.assert_allclose(adv.numpy(), expected_adv.numpy(), rtol=1e-6)


def test_rho_bar_and_c_bar_truncate_separately():
    """ρ̄ bounds the weights of the TD errors and the advantage, c̄ those of the trace."""
    g = 0.5
    reward, value = columns([1.0, 2.0]), columns([0.0, 0.0])
    behaviour, target = torch.zeros(2, 1), columns([np.log(3.0), np.log(3.0)])
    no_end = torch.zeros(2, 1, dtype=torch.bool)
    boot = columns([0.0, 0.0])
    args = (reward, value, behaviour, target, no_end, no_end, boot, g, 1.0)
    adv, vs = vtrace(*args, 2.0, 0.5)  # ρ = 2, c = 0.5
    # δ = (2, 4); v - V: t1 = 4, t0 = 2 + 0.5 * 0.5 * 4 = 3; advantage t0 = 2 (1 + 0.5 * 4)
    np.testing.assert_allclose(vs[:, 0].numpy(), [3.0, 4.0])
    np.testing.assert_allclose(adv[:, 0].numpy(), [6.0, 4.0])


@pytest.mark.parametrize("lam", [0.0, 0.8, 1.0])
def test_on_policy_vtrace_targets_are_gae_s_returns(lam):
    """π = μ and ρ̄, c̄ ≥ 1: V-trace's targets are the λ-returns GAE's advantages sum to,
    and with λ = 1 its advantages are GAE's too (episode ends of both kinds included)."""
    gen = torch.Generator().manual_seed(0)
    T, B, g = 16, 5, 0.9
    reward, value = torch.randn(T, B, generator=gen), torch.randn(T, B, generator=gen)
    ends = torch.rand(T, B, generator=gen)
    term, trunc = ends < 0.1, (ends >= 0.1) & (ends < 0.2)
    boot = torch.where(term, 0.0, torch.randn(T, B, generator=gen))
    logp = torch.randn(T, B, generator=gen)
    adv, vs = vtrace(reward, value, logp, logp, term, trunc, boot, g, lam, 1.0, 1.0)
    gae_adv, gae_ret = generalized_advantages(reward, value, term, trunc, boot, g, lam)
    np.testing.assert_allclose(vs.numpy(), gae_ret.numpy(), rtol=1e-5, atol=1e-6)
    if lam == 1.0:
        np.testing.assert_allclose(adv.numpy(), gae_adv.numpy(), rtol=1e-5, atol=1e-6)
