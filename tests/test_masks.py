"""Invalid-action masks: where a mask comes from, and that every agent acts, learns and
bootstraps over the valid actions only."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfw.agents import ActorCriticAgent
from rlfw.agents.distributions import masked_logits
from rlfw.agents.dqn_agent import DqnAgent
from rlfw.envs import EnvFactory, EnvOptions, EnvSpaces
from rlfw.envs.masks import MASK_KEY, InfoMaskInObservation, masks_actions
from rlfw.samplers import SerialSampler


def _spaces(actions: gym.Space) -> EnvSpaces:
    n = int(actions.n) if isinstance(actions, gym.spaces.Discrete) else int(actions.nvec.sum())
    obs = gym.spaces.Dict(
        {"x": gym.spaces.Box(-1, 1, (3,), np.float32), MASK_KEY: gym.spaces.MultiBinary(n)}
    )
    return EnvSpaces(obs, actions)


def _obs(mask: list[list[int]]) -> dict:
    return {
        "x": torch.linspace(-1, 1, 3 * len(mask)).reshape(len(mask), 3),
        MASK_KEY: torch.tensor(mask, dtype=torch.int8),
    }


def test_a_masked_policy_never_picks_an_invalid_action_and_its_logp_renormalizes():
    torch.manual_seed(0)
    agent = ActorCriticAgent.build(_spaces(gym.spaces.Discrete(4)), action_mask=True)
    mask = [[0, 1, 0, 1], [1, 0, 0, 0]] * 200
    obs = _obs(mask)
    step = agent.step(obs, torch.rand(len(mask)))
    valid = torch.tensor(mask, dtype=torch.bool)
    assert valid.gather(1, step.action.unsqueeze(1)).all()
    assert set(step.action[0::2].tolist()) == {1, 3}  # both valid ones do get picked
    logits, _ = agent.model(obs)
    expected = torch.log_softmax(logits[0, [1, 3]], -1)
    logp, entropy, _ = agent.evaluate_actions(obs, torch.tensor([1, 0] * 200))
    assert torch.allclose(logp[0], expected[0]) and logp[1] == 0.0  # the only valid one
    assert torch.allclose(entropy[0], -(expected.exp() * expected).sum())
    assert entropy[1] == 0.0  # masked actions add nothing to the entropy
    agent.eval_mode()
    greedy = agent.step(obs, torch.rand(len(mask))).action
    assert valid.gather(1, greedy.unsqueeze(1)).all()


def test_multi_discrete_masks_are_per_head():
    agent = ActorCriticAgent.build(_spaces(gym.spaces.MultiDiscrete([2, 3])), action_mask=True)
    obs = _obs([[1, 0, 0, 0, 1]] * 50)
    actions = agent.step(obs, torch.rand(50, 2)).action
    assert actions[:, 0].eq(0).all() and actions[:, 1].eq(2).all()
    with pytest.raises(ValueError, match=r"env slot 7 has no valid action.*in a head"):
        agent.step(_obs([[1, 1, 0, 0, 0]]), torch.rand(1, 2), slots=[7])


def test_a_row_without_a_valid_action_names_its_env_slot():
    logits = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="env slot 5 has no valid action"):
        masked_logits(logits, torch.tensor([[1, 0, 0], [0, 0, 0]]), slots=[4, 5])


def test_dqn_acts_greedily_and_explores_over_valid_actions_only():
    agent = DqnAgent.build(_spaces(gym.spaces.Discrete(5)), batch_B=400, action_mask=True)
    agent.set_epsilon(1.0)  # every action random: uniform over the valid ones
    mask = [[0, 1, 0, 1, 1]] * 400
    noise = torch.rand(400, 2)
    explored = agent.step(_obs(mask), noise, range(400)).action
    assert set(explored.tolist()) == {1, 3, 4}
    agent.eval_mode()
    greedy = agent.step(_obs(mask), noise).action
    assert set(greedy.tolist()) <= {1, 3, 4}
    value = agent.value(_obs(mask))
    q = agent.q(_obs(mask))
    assert torch.equal(value, q[:, [1, 3, 4]].max(-1).values)


def test_a_mask_in_info_travels_in_the_observation_of_every_step():
    """Taxi gives its mask in info: it lands in the buffer as the observation's
    ``action_mask`` leaf, each row the mask of that row's state."""
    factory = EnvFactory("Taxi-v4").resolved()
    assert factory.options.action_mask == "info"
    spaces = EnvSpaces.of(factory)
    assert masks_actions(spaces.observation, factory.options.action_mask)
    agent = ActorCriticAgent.build(spaces, action_mask=True)
    with SerialSampler(factory, 40, 3, seed=0) as sampler:
        sampler.initialize(agent)
        samples, _ = sampler.obtain_samples(0)
    obs, mask = samples.observation["observation"], samples.observation[MASK_KEY]
    taxi = gym.make("Taxi-v4").unwrapped
    for state, row in zip(obs.reshape(-1).tolist(), mask.reshape(-1, 6).tolist()):
        assert row == taxi.action_mask(state).tolist()
    chosen = mask.gather(-1, samples.action.unsqueeze(-1))
    assert chosen.eq(1).all()  # every action taken was valid where it was taken
    off = EnvFactory("Taxi-v4", options=EnvOptions(action_mask="none")).resolved()
    assert isinstance(EnvSpaces.of(off).observation, gym.spaces.Discrete)


def test_an_info_mask_of_the_wrong_size_is_refused():
    class Wrong(gym.Env):
        observation_space = gym.spaces.Discrete(2)
        action_space = gym.spaces.Discrete(3)

        def reset(self, *, seed=None, options=None):
            return 0, {MASK_KEY: np.ones(2, np.int8)}

    with pytest.raises(ValueError, match=r"has 2 entries; the actions Discrete\(3\) need 3"):
        InfoMaskInObservation(Wrong()).reset()


def test_a_mask_key_the_observation_lacks_is_named():
    factory = EnvFactory("CartPole-v1", options=EnvOptions(action_mask="legal"))
    with pytest.raises(ValueError, match="action_mask='legal' names an observation key"):
        factory()


def test_r2d1_refuses_an_env_with_a_mask_rather_than_ignore_it():
    from rlfw.launch.config import RunConfig
    from rlfw.registry import ALGOS

    config = RunConfig(algo="r2d1", env="Taxi-v4")
    spaces = EnvSpaces.of(config.env_factory().resolved())
    with pytest.raises(ValueError, match="r2d1 does not act over an action mask"):
        ALGOS.get("r2d1").build_agent(config, spaces)


def test_an_empty_mask_option_is_refused_by_name():
    with pytest.raises(ValueError, match="env_options.action_mask must be one of"):
        EnvFactory("Taxi-v4", options=EnvOptions(action_mask="")).validate()
