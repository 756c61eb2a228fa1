"""Recurrent agents: every sampler carries and resets each slot's state exactly as the serial
one does, evaluation keeps its own, and the learner re-runs the sampled sequences."""
import pytest
import torch

from conftest import trees_equal
from rlfw.agents import ActorCriticAgent
from rlfw.envs import EnvFactory, EnvSpaces
from rlfw.samplers import SerialSampler
from rlfw.testing import (ContinuousCountingEnv, CountingEnv, CountingRecurrentAgent,
                          CountMatchingEnv, elementwise_recurrent_agent)
from test_samplers import ALL, PARALLEL, collect


@pytest.mark.parametrize("kind", list(ALL))
def test_states_reset_exactly_at_episode_starts_and_equal_the_serial_samplers(kind):
    """B=5 over 2 workers, T=7: episodes of 3, 5 and 4 steps end mid-batch and across batch
    ends, by termination and by truncation. The agent's state counts steps since its reset,
    so it equals the observation's step index exactly when resets are exact."""
    factory = EnvFactory("counting", entry=CountingEnv)
    with SerialSampler(factory, 7, 5, seed=11, debug=True) as reference:
        expected = collect(reference, CountingRecurrentAgent(), 3)
    with ALL[kind](factory, 7, 5, 11) as sampler:
        got = collect(sampler, CountingRecurrentAgent(), 3)
    for (exp_samples, exp_eps), (got_samples, got_eps) in zip(expected, got):
        assert trees_equal(exp_samples, got_samples) and exp_eps == got_eps
        state = got_samples.agent_state[..., 0]
        assert torch.equal(state, got_samples.observation[..., 2])  # reset at every start
        assert torch.equal(got_samples.agent_info.value, state)
        # a truncated step bootstraps from its own state after the step: the episode length
        truncated = got_samples.truncated
        assert torch.equal(got_samples.bootstrap_value[truncated], state[truncated] + 1)
    assert all(any(getattr(s, end)[:-1].any() for s, _ in expected)  # mid-batch ends
               for end in ("terminated", "truncated"))


@pytest.mark.parametrize("kind", ["serial", "cpu"])
def test_evaluation_has_its_own_states_reset_per_episode(kind):
    """Greedy, the agent plays its count; CountMatchingEnv pays 1 per step only when that
    count is the episode's step: every evaluation episode earns its length. Training's
    states are untouched by it: the next batch equals one sampled without the evaluation."""
    factory = EnvFactory("count-matching", entry=CountMatchingEnv)
    with ALL[kind](factory, 7, 4, 3) as reference:
        expected = collect(reference, CountingRecurrentAgent(), 2)
    with ALL[kind](factory, 7, 4, 3) as sampler:
        agent = CountingRecurrentAgent()
        first = collect(sampler, agent, 1)
        episodes = sampler.evaluate(9, greedy=True)
        second, _ = sampler.obtain_samples(1)
    assert len(episodes) == 9 and {e.length for e in episodes} == {3, 4, 5}
    assert all(e.ret == e.length for e in episodes)
    assert trees_equal(first[0][0], expected[0][0]) and trees_equal(second, expected[1][0])


def lstm_batch(core: str):
    torch.manual_seed(0)
    factory = EnvFactory("CartPole-v1")
    agent = ActorCriticAgent.build(EnvSpaces.of(factory), recurrent=core, rnn_size=32)
    with SerialSampler(factory, 64, 6, seed=2) as sampler:
        sampler.initialize(agent)
        sampler.obtain_samples(0)
        samples, _ = sampler.obtain_samples(1)  # starts mid-episode: stored states non-zero
        samples = samples._replace(**{k: getattr(samples, k).clone()
                                      for k in ("observation", "action", "agent_state")})
    return agent, samples


@pytest.mark.parametrize("core", ["lstm", "gru"])
def test_the_learner_re_runs_the_sampled_sequences(core):
    """Recomputed log-probs and values from each column's stored first state, restarting
    at episode starts, equal what sampling recorded. The sampler steps the core one step
    for all 6 slots, the learner runs the fused kernel over stretches of the sequence:
    equal within 1e-6 (on this CPU build they come out bitwise equal)."""
    agent, samples = lstm_batch(core)
    assert samples.agent_state[0].abs().sum() > 0 and samples.episode_start.any()
    with torch.no_grad():
        logp, _, value = agent.evaluate_actions(samples.observation, samples.action,
                                                samples.agent_state[0], samples.episode_start)
    torch.testing.assert_close(logp, samples.agent_info.logp, rtol=0, atol=1e-6)
    torch.testing.assert_close(value, samples.agent_info.value, rtol=0, atol=1e-6)
    # without the resets the recomputation would be wrong: the mask matters
    with torch.no_grad():
        _, _, unreset = agent.evaluate_actions(samples.observation, samples.action,
                                               samples.agent_state[0],
                                               torch.zeros_like(samples.episode_start))
    assert (unreset - samples.agent_info.value).abs().max() > 1e-3


@pytest.mark.parametrize("kind", list(PARALLEL))
def test_a_trainable_recurrent_agent_samples_the_serial_samplers_bits(kind):
    factory = EnvFactory("continuous-counting", entry=ContinuousCountingEnv)
    runs = []
    for make in (ALL["serial"], PARALLEL[kind]):
        torch.manual_seed(0)
        agent = elementwise_recurrent_agent(EnvSpaces.of(factory))
        with make(factory, 7, 5, 11) as sampler:
            runs.append(collect(sampler, agent, 3))
    for (a, eps_a), (b, eps_b) in zip(*runs):
        assert trees_equal(a, b) and eps_a == eps_b
    assert runs[0][1][0].agent_state.abs().sum() > 0
