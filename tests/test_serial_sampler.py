"""SerialSampler against hand-written arrays from the counting env and counting agent."""

import numpy as np
import pytest
import torch

from rlfw.agents import ActorCriticAgent
from rlfw.buffers import tree_map
from rlfw.envs import EnvFactory, EnvSpaces
from rlfw.samplers import SerialSampler
from rlfw.testing import CountingAgent
from rlfw.utils.seeding import ACTION_NOISE, TRAIN_ENV, derive_seed, slot_generator

from conftest import trees_equal

T, B, SEED = 8, 3, 7


def expected_uniforms(slot: int, n: int) -> np.ndarray:
    gen = slot_generator(SEED, ACTION_NOISE, slot)
    return np.array([gen.random() for _ in range(n)], np.float32)


def test_counting_env_batches_exact(counting_factory):
    sampler = SerialSampler(counting_factory, T, B, seed=SEED, debug=True)
    sampler.initialize(CountingAgent())
    first, eps1 = sampler.obtain_samples(0)
    b1 = tree_map(torch.clone, first)  # the sampler reuses its buffer for the next batch
    second, eps2 = sampler.obtain_samples(1)

    for slot in range(B):
        tag = derive_seed(SEED, TRAIN_ENV, 0, slot) % 997
        # Batch 1: episode 0 (3 steps, terminates), episode 1 (5 steps, truncates at t=7).
        obs = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3), (1, 4)]
        assert b1.observation[:, slot].tolist() == [[tag, e, t] for e, t in obs]
        assert b1.reward[:, slot].tolist() == [1, 2, 3, 1, 2, 3, 4, 5]
        assert b1.terminated[:, slot].tolist() == [0, 0, 1, 0, 0, 0, 0, 0]
        assert b1.truncated[:, slot].tolist() == [0, 0, 0, 0, 0, 0, 0, 1]
        # Truncated at the last step: V(true final obs (1, 5)) = 15, not V(reset obs).
        assert b1.bootstrap_value[:, slot].tolist() == [0, 0, 0, 0, 0, 0, 0, 15]
        # Batch 2: episode 2 (4 steps, terminates), episode 3 (3 steps, truncates at t=6),
        # then episode 4 still running at the batch end: bootstrap V(obs (4, 1)) = 41.
        obs2 = [(2, 0), (2, 1), (2, 2), (2, 3), (3, 0), (3, 1), (3, 2), (4, 0)]
        assert second.observation[:, slot].tolist() == [[tag, e, t] for e, t in obs2]
        assert second.reward[:, slot].tolist() == [1, 2, 3, 4, 1, 2, 3, 1]
        assert second.terminated[:, slot].tolist() == [0, 0, 0, 1, 0, 0, 0, 0]
        assert second.truncated[:, slot].tolist() == [0, 0, 0, 0, 0, 0, 1, 0]
        assert second.bootstrap_value[:, slot].tolist() == [0, 0, 0, 0, 0, 0, 33, 41]
        assert second.agent_info.value[:, slot].tolist() == [10 * e + t for e, t in obs2]
        # Each slot's actions come from its own noise stream, in order, across batches.
        u = expected_uniforms(slot, 2 * T)
        assert torch.equal(b1.agent_info.logp[:, slot], torch.from_numpy(u[:T]))
        assert torch.equal(second.agent_info.logp[:, slot], torch.from_numpy(u[T:]))
        assert b1.action[:, slot].tolist() == (u[:T] * 3).astype(int).tolist()
    assert len({derive_seed(SEED, TRAIN_ENV, 0, s) % 997 for s in range(B)}) == B
    # Episode statistics: one record per finished episode, with the real return.
    assert sorted((e.slot, e.ret, e.length) for e in eps1) == sorted(
        [(s, 6.0, 3) for s in range(B)] + [(s, 15.0, 5) for s in range(B)]
    )
    assert sorted((e.slot, e.ret, e.length) for e in eps2) == sorted(
        [(s, 10.0, 4) for s in range(B)] + [(s, 6.0, 3) for s in range(B)]
    )
    sampler.close()


def test_same_seed_twice_is_bitwise_identical_with_a_stochastic_agent():
    factory = EnvFactory("CartPole-v1")
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        agent = ActorCriticAgent.build(EnvSpaces.of(factory))
        with SerialSampler(factory, 16, 4, seed=3) as sampler:
            sampler.initialize(agent)
            runs.append([tree_map(torch.clone, sampler.obtain_samples(i)[0]) for i in range(3)])
    assert all(trees_equal(a, b) for a, b in zip(*runs))
    # Sampling really was stochastic: not every slot took the same actions.
    assert not torch.equal(runs[0][0].action[:, 0], runs[0][0].action[:, 1])


def test_different_seeds_differ():
    factory = EnvFactory("CartPole-v1")
    obs = []
    for seed in (0, 1):
        torch.manual_seed(0)
        agent = ActorCriticAgent.build(EnvSpaces.of(factory))
        with SerialSampler(factory, 8, 2, seed=seed) as sampler:
            sampler.initialize(agent)
            obs.append(sampler.obtain_samples(0)[0].observation.clone())
    assert not torch.equal(obs[0], obs[1])


def test_evaluation_splits_episodes_over_envs_and_is_greedy(counting_factory):
    agent = CountingAgent()
    with SerialSampler(counting_factory, 4, 2, seed=0, n_eval_envs=3) as sampler:
        sampler.initialize(agent)
        episodes = sampler.evaluate(7)
        assert len(episodes) == 7
        assert sorted(np.bincount([e.slot for e in episodes]).tolist()) == [2, 2, 3]
        assert agent.greedy is False  # evaluation restored the sampling mode
        # Eval envs are seeded apart from training and each call is reproducible on its own.
        again = SerialSampler(counting_factory, 4, 2, seed=0, n_eval_envs=3)
        again.initialize(CountingAgent())
        assert [e.ret for e in again.evaluate(7)] == [e.ret for e in episodes]
        again.close()


@pytest.mark.parametrize("field,value", [("batch_T", 0), ("batch_B", -2), ("n_eval_envs", 0)])
def test_bad_sizes_raise(counting_factory, field, value):
    kwargs = dict(batch_T=4, batch_B=2, n_eval_envs=1)
    kwargs[field] = value
    with pytest.raises(ValueError, match=field):
        SerialSampler(counting_factory, **kwargs)
