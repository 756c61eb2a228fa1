"""GAE against values worked out by hand."""

import numpy as np
import pytest
import torch

from rlfw.algos.pg.gae import generalized_advantages


def t(rows, dtype=torch.float32):
    return torch.tensor(rows, dtype=dtype).reshape(len(rows), 1)


def test_gae_by_hand_with_termination_inside_the_batch():
    # T=4, one env; episode ends by termination at t=1, new episode t=2..3 runs past the end.
    g, lam = 0.9, 0.5
    reward = t([1.0, 2.0, 3.0, 4.0])
    value = t([0.5, 1.0, 2.0, 3.0])
    term = t([0, 1, 0, 0], torch.bool)
    trunc = t([0, 0, 0, 0], torch.bool)
    boot = t([0, 0, 0, 10.0])  # V(obs after the batch)
    adv, ret = generalized_advantages(reward, value, term, trunc, boot, g, lam)
    d3 = 4 + g * 10 - 3  # 10.0
    d2 = 3 + g * 3 - 2  # 3.7
    d1 = 2 + 0 - 1  # terminated: no bootstrap
    d0 = 1 + g * 1.0 - 0.5  # 1.4
    a3 = d3
    a2 = d2 + g * lam * a3
    a1 = d1  # recursion stops at the episode end
    a0 = d0 + g * lam * a1
    np.testing.assert_allclose(adv[:, 0].numpy(), [a0, a1, a2, a3], rtol=1e-6)
    np.testing.assert_allclose(
        ret[:, 0].numpy(), np.array([a0, a1, a2, a3]) + [0.5, 1, 2, 3], rtol=1e-6
    )


def test_truncated_step_bootstraps_from_its_final_observation_value():
    g, lam = 0.99, 0.95
    reward = t([1.0, 1.0, 1.0])
    value = t([0.0, 0.0, 7.0])  # value[2] belongs to the *next* episode's first obs
    term = t([0, 0, 0], torch.bool)
    trunc = t([0, 1, 0], torch.bool)
    boot = t([0, 5.0, 0.0])  # V(true final obs of the truncated episode) = 5
    adv, _ = generalized_advantages(reward, value, term, trunc, boot, g, lam)
    assert adv[1, 0].item() == pytest.approx(1 + g * 5.0)  # not 1 + g*7 (reset obs)
    assert adv[0, 0].item() == pytest.approx(1 + g * 0.0 + g * lam * (1 + g * 5.0))


def test_terminated_step_never_bootstraps_even_with_a_bootstrap_value():
    adv, _ = generalized_advantages(
        t([1.0]), t([0.25]), t([1], torch.bool), t([0], torch.bool), t([100.0]), 0.99, 0.95
    )
    assert adv[0, 0].item() == pytest.approx(1 - 0.25)


def test_infinite_horizon_truncation_keeps_returns_at_one_over_one_minus_gamma():
    # Reward 1 forever, V exact everywhere: truncation must not look like a terminal state.
    g, n = 0.9, 20
    v = 1 / (1 - g)
    trunc = torch.zeros(n, 1, dtype=torch.bool)
    trunc[9] = trunc[19] = True
    boot = torch.zeros(n, 1)
    boot[9] = boot[19] = v
    adv, ret = generalized_advantages(
        torch.ones(n, 1),
        torch.full((n, 1), v),
        torch.zeros(n, 1, dtype=torch.bool),
        trunc,
        boot,
        g,
        0.95,
    )
    np.testing.assert_allclose(ret.numpy(), v, rtol=1e-5)
    np.testing.assert_allclose(adv.numpy(), 0, atol=1e-5)


def test_lambda_one_gives_discounted_returns_and_zero_gives_td():
    reward, value = t([1.0, 2.0, 3.0]), t([0.1, 0.2, 0.3])
    no = t([0, 0, 0], torch.bool)
    boot = t([0, 0, 4.0])
    _, ret = generalized_advantages(reward, value, no, no, boot, 0.5, 1.0)
    np.testing.assert_allclose(
        ret[:, 0].numpy(),
        [1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 4, 2 + 0.5 * 3 + 0.25 * 4, 3 + 0.5 * 4],
        rtol=1e-6,
    )
    adv, _ = generalized_advantages(reward, value, no, no, boot, 0.5, 0.0)
    np.testing.assert_allclose(
        adv[:, 0].numpy(), [1 + 0.5 * 0.2 - 0.1, 2 + 0.5 * 0.3 - 0.2, 3 + 0.5 * 4 - 0.3], rtol=1e-6
    )
