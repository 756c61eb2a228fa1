"""PPO/A2C: determinism, Gaussian actions, and config validation."""

import gymnasium as gym
import pytest
import torch

from rlfw.agents import ActorCriticAgent
from rlfw.algos import A2C, PPO, A2CConfig, PPOConfig
from rlfw.envs import EnvFactory, EnvSpaces
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.runners import RunSchedule
from rlfw.testing import ContinuousCountingEnv

from conftest import bits


def final_params(algo: str, seed: int) -> dict:
    config = apply_overrides(RunConfig(algo=algo, seed=seed), preset(algo, "CartPole-v1"))
    per_itr = config.batch_B * config.batch_T
    config.schedule = RunSchedule(n_steps=2 * per_itr, eval_every=per_itr, eval_episodes=2)
    runner = build_runner(config, None, progress=False, stdout=False)
    runner.train()
    return {
        **runner.agent.state_dict(),
        **{f"opt/{k}": v for k, v in _flat_optimizer(runner.algo).items()},
    }


def _flat_optimizer(algo) -> dict:
    state = algo.optimizer.state_dict()["state"]
    return {
        f"{i}/{k}": v for i, s in state.items() for k, v in s.items() if isinstance(v, torch.Tensor)
    }


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
@pytest.mark.integration
def test_same_seed_twice_gives_bitwise_identical_parameters(algo):
    a, b = final_params(algo, 0), final_params(algo, 0)
    assert a.keys() == b.keys()
    assert all(torch.equal(bits(a[k]), bits(b[k])) for k in a)
    c = final_params(algo, 1)
    assert not torch.equal(a["pi.0.weight"], c["pi.0.weight"])


@pytest.mark.parametrize("algo_cls", [PPO, A2C])
def test_gaussian_policy_on_box_actions_updates(algo_cls):
    from rlfw.samplers import SerialSampler

    factory = EnvFactory("cont", entry=ContinuousCountingEnv)
    agent = ActorCriticAgent.build(EnvSpaces.of(factory))
    before = [p.detach().clone() for p in agent.parameters()]
    algo = algo_cls()
    with SerialSampler(factory, 8, 2, seed=0) as sampler:
        sampler.initialize(agent)
        algo.initialize(agent, n_itr=1)
        samples, _ = sampler.obtain_samples(0)
        assert samples.action.shape == (8, 2, 2) and samples.action.dtype == torch.float32
        stats = algo.optimize(samples, 0)
    assert all(v == v for v in stats.values())  # no NaN
    assert any(not torch.equal(x, p) for x, p in zip(before, agent.parameters()))


def test_unsupported_action_space_is_a_clear_error():
    box = gym.spaces.Box(-1, 1, (3,))
    spaces = EnvSpaces(box, gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(3))))
    with pytest.raises(ValueError, match=r"Tuple.*not supported by ppo: use Discrete, Multi"):
        ActorCriticAgent.build(spaces, algo="ppo")
    # the Q-learning family names the joint actions a wrapper could number
    from rlfw.agents.dqn_agent import DqnAgent

    multi = EnvSpaces(box, gym.spaces.MultiDiscrete([2, 3]))
    with pytest.raises(ValueError, match=r"by dqn: .*its 6 joint actions could be one Discrete"):
        DqnAgent.build(multi, batch_B=1)


@pytest.mark.parametrize(
    "cfg,field",
    [
        (PPOConfig(epochs=0), "epochs"),
        (PPOConfig(minibatch_size=-1), "minibatch_size"),
        (PPOConfig(clip=0.0), "clip"),
        (PPOConfig(gamma=1.5), "gamma"),
        (PPOConfig(learning_rate=0), "learning_rate"),
        (PPOConfig(optimizer="sgd"), "optimizer"),
        (PPOConfig(amp="fp16"), "amp = 'fp16' is invalid: one of \\(None, 'bf16'\\)"),
        (PPOConfig(value_clip_form="min"), "value_clip_form = 'min' is invalid: one of"),
        (A2CConfig(gae_lambda=-0.1), "gae_lambda"),
        (A2CConfig(max_grad_norm=0), "max_grad_norm"),
    ],
)
def test_bad_algorithm_config_names_the_field(cfg, field):
    with pytest.raises(ValueError, match=field):
        cfg.validate()
    with pytest.raises(ValueError, match=field):  # the algorithm refuses it at construction
        PPO(cfg) if isinstance(cfg, PPOConfig) else A2C(cfg)


def test_ppo_amp_bf16_runs_the_loss_in_bfloat16_and_still_learns_a_step():
    """bf16 autocast is on (the update differs from fp32's) and the weights stay float32."""
    from test_runner import small_config

    from rlfw.launch.build import build_runner

    def one_update(amp):
        config = small_config(itrs=1)
        config.ppo.amp = amp
        with build_runner(config, None, progress=False, stdout=False) as runner:
            runner.train()
        return runner.agent.state_dict()

    fp32, bf16 = one_update(None), one_update("bf16")
    assert all(v.dtype == fp32[k].dtype for k, v in bf16.items())
    assert any(not torch.equal(fp32[k], bf16[k]) for k in fp32)
    for k in fp32:
        assert torch.allclose(fp32[k], bf16[k], atol=0.05), k


class _FixedValues:
    """An agent whose evaluation returns given value predictions (log-probs 0)."""

    def __init__(self, value):
        self.value = torch.tensor(value)

    def evaluate_actions(self, obs, action):
        zeros = torch.zeros_like(self.value)
        return zeros, zeros, self.value


@pytest.mark.parametrize(
    "value_clip,form,expected",
    [
        (None, "max", (1.0 + 0.25) / 2),  # plain squared error
        (0.2, "max", (1.0 + 0.25) / 2),  # the larger error: unclipped 1.0 beats 0.04
        (0.2, "clipped", (0.04 + 0.25) / 2),  # SB3: the clipped prediction 0.2's error
    ],
)
def test_ppo_value_loss_forms_against_hand_computed_values(value_clip, form, expected):
    """Predictions 1.0 and 0.0 from old values 0.0, returns 0.0 and 0.5, clip 0.2: the
    first prediction's clipped form is 0.2 (error 0.04), the second is inside the clip."""
    ppo = PPO(PPOConfig(value_clip=value_clip, value_clip_form=form))
    ppo.agent = _FixedValues([1.0, 0.0])
    zeros = torch.zeros(2)
    _, stats = ppo._losses(
        None,
        None,
        zeros,
        zeros,
        torch.tensor([1.0, -1.0]),
        torch.tensor([0.0, 0.5]),
        torch.tensor(0.2),
    )
    assert stats[1].item() == pytest.approx(expected)
