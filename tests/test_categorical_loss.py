"""PPO's closed-form categorical loss: the same loss and statistics, bit for bit, as the
generic autograd path, and the gradient autograd gives, in every configuration, at the
kinks (ratios inside and outside the clip range, ties) and under an action mask."""

import dataclasses

import pytest
import torch

from rlfw.agents import ActorCriticAgent
from rlfw.agents.distributions import Categorical, masked_logits
from rlfw.algos import PPOConfig
from rlfw.algos.pg.ppo import PPO
from rlfw.envs import EnvFactory, EnvSpaces

N, A = 64, 5


class _GivenParams:
    """A stand-in agent whose distribution parameters and values are the observation."""

    def __init__(self) -> None:
        self.distribution = Categorical(A)

    def evaluate_params(self, obs):
        return obs

    def evaluate_actions(self, obs, action):
        logits, value = obs
        return (*self.distribution.log_prob_and_entropy(logits, action), value)


def _loss(config: PPOConfig, closed_form: bool, inputs: dict, params: tuple) -> tuple:
    """(loss, stats, d loss / d logits, d loss / d value) through ``PPO._losses``."""
    ppo = PPO(config)
    ppo.agent = _GivenParams()
    ppo._closed_form = closed_form
    logits, value = (p.detach().clone().requires_grad_() for p in params)
    used = logits if inputs["mask"] is None else masked_logits(logits, inputs["mask"])
    loss, stats = ppo._losses(
        (used, value),
        inputs["action"],
        inputs["old_logp"],
        inputs["old_value"],
        inputs["adv"],
        inputs["ret"],
        inputs["clip"],
    )
    grads = torch.autograd.grad(loss, (logits, value))
    return loss.detach(), stats, *grads


def _inputs(dtype: torch.dtype, masked: bool, seed: int = 0) -> tuple[dict, tuple]:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(N, A, generator=g, dtype=dtype)
    value = torch.randn(N, generator=g, dtype=dtype)
    mask = (torch.rand(N, A, generator=g) > 0.3) if masked else None
    if mask is not None:
        mask[:, 0] = True  # every row keeps a valid action
    valid = logits if mask is None else masked_logits(logits, mask)
    probs = torch.softmax(valid, -1)
    action = torch.multinomial(probs, 1, generator=g).squeeze(-1)
    logp = torch.log_softmax(valid, -1).gather(-1, action[:, None]).squeeze(-1)
    # ratios spread over the clip range and beyond; a quarter of them exactly 1 (ties
    # between the clipped and unclipped terms)
    old_logp = logp + 0.3 * torch.randn(N, generator=g, dtype=dtype)
    old_logp[: N // 4] = logp[: N // 4]
    old_value = value + 0.3 * torch.randn(N, generator=g, dtype=dtype)
    old_value[: N // 4] = value[: N // 4]  # value steps of 0: ties in the 'max' form
    ret = torch.randn(N, generator=g, dtype=dtype)
    # and a tie between opposite errors, the clipped one's step cut short (value clip 0.5):
    # value 1, return 0, old value -1.5, clipped value -1
    ties = slice(N // 4, N // 4 + 4)
    value[ties], ret[ties], old_value[ties] = 1.0, 0.0, -1.5
    inputs = dict(
        action=action,
        old_logp=old_logp,
        old_value=old_value,
        adv=torch.randn(N, generator=g, dtype=dtype),
        ret=ret,
        clip=torch.tensor(0.2, dtype=dtype),
        mask=mask,
    )
    return inputs, (logits, value)


CONFIGS = [
    {},
    {"entropy_coef": 0.01, "value_coef": 0.25},
    {"normalize_advantage": False},
    {"value_clip": 0.5},
    {"value_clip": 0.5, "value_clip_form": "clipped", "entropy_coef": 0.05},
]


@pytest.mark.parametrize("settings", CONFIGS)
@pytest.mark.parametrize("masked", [False, True])
def test_closed_form_loss_equals_autograd_s(settings, masked):
    config = dataclasses.replace(PPOConfig(), **settings)
    for dtype, tolerance in ((torch.float32, 1e-6), (torch.float64, 1e-13)):
        inputs, params = _inputs(dtype, masked)
        closed = _loss(config, True, inputs, params)
        generic = _loss(config, False, inputs, params)
        assert torch.equal(closed[0], generic[0]) and torch.equal(closed[1], generic[1])
        for mine, autograd in zip(closed[2:], generic[2:]):
            assert mine.dtype == autograd.dtype
            assert torch.allclose(mine, autograd, rtol=tolerance, atol=tolerance)
        moved = closed[2][closed[2] != 0]
        assert len(moved) > N  # the comparison compared real gradients
        if masked:  # masked actions get no gradient
            assert closed[2][~inputs["mask"]].eq(0).all()


def test_closed_form_gradient_passes_gradcheck_and_scales_with_the_upstream_gradient():
    config = dataclasses.replace(PPOConfig(), entropy_coef=0.01, value_clip=0.5)
    inputs, params = _inputs(torch.float64, masked=False, seed=1)
    ppo = PPO(config)
    ppo.agent = _GivenParams()
    ppo._closed_form = True

    def loss(logits, value):
        rest = [inputs[k] for k in ("action", "old_logp", "old_value", "adv", "ret", "clip")]
        return ppo._losses((logits, value), *rest)[0]

    logits, value = (p.clone().requires_grad_() for p in params)
    assert torch.autograd.gradcheck(loss, (logits, value))
    (3 * loss(logits, value)).backward()
    once = torch.autograd.grad(loss(logits, value), logits)[0]
    assert torch.allclose(logits.grad, 3 * once, rtol=1e-12, atol=1e-15)


def test_closed_form_is_taken_only_where_it_replaces_rlfws_own_evaluation():
    """A feed-forward categorical ActorCriticAgent gets the closed form; a subclass that
    overrides ``evaluate_actions``, a recurrent core, a Gaussian policy and bf16 autocast
    keep the generic path."""

    class Overriding(ActorCriticAgent):
        def evaluate_actions(self, obs, action, state=None, episode_start=None):
            logp, entropy, value = super().evaluate_actions(obs, action, state, episode_start)
            return logp, entropy, value + 1.0

    def taken(agent, **settings) -> bool:
        ppo = PPO(dataclasses.replace(PPOConfig(), **settings))
        ppo.initialize(agent, n_itr=1)
        return ppo._closed_form

    discrete = EnvSpaces.of(EnvFactory("CartPole-v1"))
    assert taken(ActorCriticAgent.build(discrete))
    assert not taken(Overriding.build(discrete))
    assert not taken(ActorCriticAgent.build(discrete), amp="bf16")
    assert not taken(ActorCriticAgent.build(discrete, recurrent="lstm"))
    assert not taken(ActorCriticAgent.build(EnvSpaces.of(EnvFactory("Pendulum-v1"))))
