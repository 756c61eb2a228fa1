"""Replay: sum-tree statistics, n-step targets by hand, frame-deduplicated stacks."""

import gymnasium as gym
import numpy as np
import psutil
import pytest
import torch

from rlfw.buffers import AgentInfo, Samples
from rlfw.buffers.replay import (
    FrameStorage,
    PrioritizedSampling,
    Replay,
    RowStorage,
    SumTree,
    UniformSampling,
)


def test_sum_tree_sampling_frequencies_follow_priorities_and_updates():
    tree = SumTree(5)
    tree.update(np.arange(5), np.array([1.0, 2.0, 0.0, 3.0, 4.0]))
    assert tree.total == pytest.approx(10.0)
    rng = np.random.default_rng(0)
    counts = np.bincount(tree.sample(100_000, rng), minlength=5) / 100_000
    np.testing.assert_allclose(counts, [0.1, 0.2, 0.0, 0.3, 0.4], atol=0.01)
    tree.update(np.array([2, 4]), np.array([6.0, 0.0]))  # updates change the distribution
    counts = np.bincount(tree.sample(100_000, rng), minlength=5) / 100_000
    np.testing.assert_allclose(counts, [1 / 12, 2 / 12, 6 / 12, 3 / 12, 0.0], atol=0.01)


def test_sum_tree_rejects_bad_priorities():
    with pytest.raises(ValueError, match="non-negative"):
        SumTree(4).update(np.array([0]), np.array([-1.0]))


def rows(rewards, terminated, truncated, boot=None, B=1, obs=None):
    T = len(rewards)

    def col(x, dt):
        return torch.tensor(x, dtype=dt).reshape(T, 1).repeat(1, B)

    observation = (
        obs
        if obs is not None
        else torch.arange(T, dtype=torch.float32).reshape(T, 1, 1).repeat(1, B, 1)
    )
    return Samples(
        observation,
        torch.zeros(T, B, dtype=torch.long),
        col(rewards, torch.float32),
        col(terminated, torch.bool),
        col(truncated, torch.bool),
        AgentInfo(torch.zeros(T, B), torch.zeros(T, B)),
        col(boot if boot is not None else [0.0] * T, torch.float32),
    )


def make_replay(capacity, n, gamma, B=1, sampling=None):
    storage = RowStorage(capacity, B, (1,), np.float32, (), np.int64)
    return Replay(storage, sampling or UniformSampling(0), n_step=n, gamma=gamma)


def test_n_step_targets_by_hand_across_termination_and_truncation():
    g = 0.5
    replay = make_replay(16, 3, g)
    # rows: 0 1 2 3(terminated) 4 5(truncated, V=8) 6 7 8 9
    replay.append_samples(
        rows(
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
            [0, 0, 0, 1, 0, 0, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, 1, 0, 0, 0, 0],
            boot=[0, 0, 0, 0, 0, 8.0, 0, 0, 0, 0],
        )
    )
    b = replay.batch(np.array([0, 2, 3, 4, 5, 6]))
    ret, disc = b.n_step_return.tolist(), b.bootstrap_discount.tolist()
    assert ret[0] == pytest.approx(1 + g * 2 + g * g * 3) and disc[0] == pytest.approx(g**3)
    assert b.next_observation[0].item() == 3.0  # obs at row 0 + 3
    assert ret[1] == pytest.approx(3 + g * 4) and disc[1] == 0.0  # stops at termination
    assert ret[2] == pytest.approx(4) and disc[2] == 0.0
    assert ret[3] == pytest.approx(5 + g * 6) and disc[3] == pytest.approx(g * g)
    assert b.next_value_known[3] and b.next_value[3] == 8.0  # V(true final obs)
    assert ret[4] == pytest.approx(6) and b.next_value_known[4]
    assert ret[5] == pytest.approx(7 + g * 8 + g * g * 9) and not b.next_value_known[5]
    assert b.next_observation[5].item() == 9.0


def test_n_step_targets_wrap_around_the_ring():
    replay = make_replay(6, 2, 0.9)
    replay.append_samples(rows([1, 2, 3, 4], [0] * 4, [0] * 4))
    replay.append_samples(
        rows(
            [5, 6, 7, 8],
            [0, 0, 0, 1],
            [0] * 4,
            obs=torch.arange(4, 8, dtype=torch.float32).reshape(4, 1, 1),
        )
    )
    # Steps 0..7 in a ring of 6 rows: rows [0..5] hold steps [6, 7, 2, 3, 4, 5].
    assert replay.oldest_row == 2
    # Steps 2..5 are sampleable; steps 6 and 7 (the newest n=2) lack their lookahead.
    assert replay.valid_offsets().tolist() == [0, 1, 2, 3]
    b = replay.batch(np.array([5, 4]))  # step 5 (row 5) and step 4 (row 4)
    assert b.n_step_return[0].item() == pytest.approx(6 + 0.9 * 7)  # row 5 -> row 0
    assert b.bootstrap_discount[0].item() == pytest.approx(0.81)
    assert b.next_observation[0].item() == 7.0  # step 7, at row 1
    assert b.n_step_return[1].item() == pytest.approx(5 + 0.9 * 6)
    assert b.next_observation[1].item() == 6.0  # step 6, at row 0
    sampled = {int(i) for _ in range(50) for i in replay.sample(4).index}
    assert sampled == {2, 3, 4, 5}
    empty = make_replay(6, 2, 0.9)
    empty.append_samples(rows([1, 2], [0, 0], [0, 0]))
    with pytest.raises(ValueError, match="no sampleable transitions yet"):
        empty.sample(1)


def test_frame_storage_rebuilds_every_stack_exactly_including_episode_starts():
    from rlfw.agents.random_agent import RandomAgent
    from rlfw.envs import EnvFactory
    from rlfw.samplers import SerialSampler
    from rlfw.testing import stacked_frame_counting_env

    factory = EnvFactory("frames", entry=stacked_frame_counting_env)
    B, T, capacity = 3, 10, 3 * 25  # 25 rows: the ring wraps during the run
    frames = Replay(
        FrameStorage(capacity, B, (4, 2, 2), np.uint8, (), np.int64),
        UniformSampling(0),
        n_step=3,
        gamma=0.9,
    )
    full = Replay(
        RowStorage(capacity, B, (4, 2, 2), np.uint8, (), np.int64),
        UniformSampling(0),
        n_step=3,
        gamma=0.9,
    )
    assert frames.storage.frames.nbytes * 4 == full.storage.obs.nbytes
    with SerialSampler(factory, T, B, seed=0) as sampler:
        sampler.initialize(RandomAgent(factory().action_space))
        checked = 0
        for itr in range(7):
            samples, _ = sampler.obtain_samples(itr)
            frames.append_samples(samples)
            full.append_samples(samples)
            ids = np.array(
                [
                    (frames.oldest_row + o) % frames.storage.T * B + b
                    for o in frames.valid_offsets()
                    for b in range(B)
                ]
            )
            got, want = frames.batch(ids), full.batch(ids)
            assert torch.equal(got.observation, want.observation)
            assert torch.equal(got.next_observation, want.next_observation)
            checked += len(ids)
    assert frames.storage.rows_written > frames.storage.T  # the ring did wrap
    # Every stack holds one episode's frames: same episode code, steps consecutive or padded.
    stacks = got.observation[:, :, 0, 0].numpy().astype(int)
    assert (np.diff(stacks // 16, axis=1) == 0).all()
    assert np.isin(np.diff(stacks % 16, axis=1), [0, 1]).all()
    assert (stacks % 16 == 0).any() and checked > 300


@pytest.mark.integration
def test_atari_sized_frame_storage_memory_is_measured_under_800_mb():
    process = psutil.Process()
    before = process.memory_info().rss
    storage = FrameStorage(100_000, 8, (4, 84, 84), np.uint8, (), np.int64)
    for array in (
        storage.frames,
        storage.action,
        storage.reward,
        storage.terminated,
        storage.truncated,
        storage.bootstrap_value,
        storage.episode_start,
    ):
        array.fill(1)  # touch every page: measure what is really resident
    grown = process.memory_info().rss - before
    assert grown <= 800 * 2**20, f"{grown / 2**20:.0f} MB"
    assert grown >= 100_000 * 84 * 84 * 0.9  # and the frames really are there
    del storage


def test_bad_replay_settings_are_clear_errors():
    with pytest.raises(ValueError, match="n_step must be an integer >= 1, got 0"):
        make_replay(16, 0, 0.9)
    with pytest.raises(ValueError, match="capacity 2 is smaller than batch_B=4"):
        RowStorage(2, 4, (1,), np.float32, (), np.int64)


def test_prioritized_sampling_prefers_high_td_errors_and_weights_correct_bias():
    sampling = PrioritizedSampling(alpha=1.0, beta=1.0, seed=0)
    replay = make_replay(64, 1, 0.9, sampling=sampling)
    replay.append_samples(rows(list(range(20)), [0] * 20, [0] * 20))
    assert len(replay) == 19
    # New transitions share the max priority; valid ones only (the newest row has none).
    assert sampling.tree.get(np.arange(20)).tolist() == [1.0] * 19 + [0.0]
    replay.update_priorities(np.arange(19), np.where(np.arange(19) == 7, 99.0, 1.0))
    batch = replay.sample(1000)
    share = np.mean(batch.index == 7)
    assert share == pytest.approx(99 / (99 + 18), abs=0.05)
    w = batch.weight.numpy()
    assert w[batch.index == 7].max() < w[batch.index != 7].min()  # rare ones weigh more
    assert w.max() == pytest.approx(1.0)


def test_rows_written_ahead_into_the_reserve_change_no_sampled_transition():
    """The async runner's view: sampling sees ``visible_rows`` in a window of ``capacity``
    rows; a writer up to ``reserve_rows`` ahead (wrapping included) changes nothing drawn."""

    def replay_with(extra_batches):
        storage = RowStorage(8 + 4, 1, (1,), np.float32, (), np.int64)  # 8 rows + 4 reserve
        replay = Replay(storage, UniformSampling(3), n_step=1, gamma=0.9, reserve_rows=4)

        def obs(start):
            return torch.arange(start, start + 4, dtype=torch.float32).reshape(4, 1, 1)

        for k in range(3 + extra_batches):  # batches of 4 rows; rows 8-11 wrap past the window
            replay.append_samples(
                rows([float(4 * k + t) for t in range(4)], [0] * 4, [0] * 4, obs=obs(4 * k))
            )
        replay.visible_rows = 12
        return replay

    alone, ahead = replay_with(0), replay_with(1)
    assert len(alone) == len(ahead) == 7  # window 8 rows, the newest has no successor yet
    a, b = alone.sample(64), ahead.sample(64)
    assert torch.equal(a.observation, b.observation) and torch.equal(
        a.n_step_return, b.n_step_return
    )
    assert set(a.observation.flatten().tolist()) == set(range(4, 11))  # rows 4..10
    assert torch.equal(a.next_observation, a.observation + 1)


def test_a_replay_reserve_leaves_a_window_for_n_step():
    storage = RowStorage(6, 1, (1,), np.float32, (), np.int64)
    with pytest.raises(ValueError, match="reserve_rows=6 must be in"):
        Replay(storage, UniformSampling(0), reserve_rows=6)
    with pytest.raises(ValueError, match="n_step=3 needs a replay of more than 3 rows"):
        Replay(storage, UniformSampling(0), n_step=3, reserve_rows=3)


def test_revealed_rows_get_the_max_priority_and_rows_leaving_the_window_none():
    """The async learner's prioritized replay: another process writes the storage (up to
    the reserve ahead); ``reveal`` alone decides which rows the tree holds."""
    storage = RowStorage(8 + 4, 1, (1,), np.float32, (), np.int64)  # 8 rows + 4 reserve
    sampling = PrioritizedSampling(alpha=0.5, beta=0.4, seed=0)
    replay = Replay(storage, sampling, n_step=1, gamma=0.9, reserve_rows=4)
    for k in range(3):  # the writer runs a batch ahead of what the learner was told of
        storage.append(rows([1.0] * 4, [0] * 4, [0] * 4))
    replay.reveal(4)
    assert sampling.tree.get(np.arange(12)).tolist() == [1.0] * 3 + [0.0] * 9
    replay.update_priorities(np.array([1]), np.array([15.0]))  # the learner's TD error
    assert sampling.tree.get(np.array([1]))[0] == pytest.approx((15.0 + 1e-6) ** 0.5)
    assert np.mean(replay.sample(2000).index == 1) == pytest.approx(
        15**0.5 / (15**0.5 + 2), abs=0.04
    )  # the next draws use it
    replay.reveal(8)
    # rows 3..6 new at the max priority (|15| + eps)^0.5; row 1 keeps its own
    held = sampling.tree.get(np.arange(12))
    assert held[3:7].tolist() == pytest.approx([(15.0 + 1e-6) ** 0.5] * 4)
    assert held[1] == pytest.approx((15.0 + 1e-6) ** 0.5) and held[7:].sum() == 0
    storage.append(rows([1.0] * 4, [0] * 4, [0] * 4))  # wraps into rows 0..3
    replay.reveal(12)
    replay.reveal(16)  # the window is rows 8..15 (mod 12): 8..11, 0..2 sampleable
    held = sampling.tree.get(np.arange(12))
    assert (held[[8, 9, 10, 11, 0, 1, 2]] > 0).all() and (held[3:8] == 0).all()
    state = replay.state_dict()
    again = Replay(
        RowStorage(12, 1, (1,), np.float32, (), np.int64),
        PrioritizedSampling(alpha=0.5, beta=0.4, seed=0),
        n_step=1,
        gamma=0.9,
        reserve_rows=4,
    )
    again.load_state_dict(state)
    assert again.visible_rows == 16 and np.array_equal(
        again.sampling.tree.nodes, sampling.tree.nodes
    )


def _stacked_frames_batch(stack: bool):
    from rlfw.agents.random_agent import RandomAgent
    from rlfw.envs import EnvFactory
    from rlfw.samplers import SerialSampler
    from rlfw.testing import stacked_frame_counting_env

    factory = EnvFactory("frames", entry=stacked_frame_counting_env)
    with SerialSampler(factory, 20, 2, seed=0) as sampler:
        sampler.initialize(RandomAgent(factory().action_space))
        samples, _ = sampler.obtain_samples(0)
    if not stack:  # the same values, the stack's frames in another order: not a stack
        samples.observation[:] = samples.observation.flip(2).clone()
    return samples


def test_frames_are_stacked_tells_a_frame_stack_from_other_channels():
    from rlfw.buffers.replay.storage import frames_are_stacked

    for stack in (True, False):
        samples = _stacked_frames_batch(stack)
        done = (samples.terminated | samples.truncated).numpy()
        starts = np.concatenate([np.ones((1, 2), bool), done[:-1]])
        assert frames_are_stacked(samples.observation.numpy(), starts) is stack


def test_frame_storage_refuses_observations_that_are_not_frame_stacks():
    storage = FrameStorage(100, 2, (4, 2, 2), np.uint8, (), np.int64)
    storage.append(_stacked_frames_batch(True))
    with pytest.raises(ValueError, match=r"not a stack of frames .* set frame_dedup=False"):
        FrameStorage(100, 2, (4, 2, 2), np.uint8, (), np.int64).append(_stacked_frames_batch(False))


def test_dqn_asks_the_env_whether_it_stacks_frames():
    from rlfw.algos import DQNConfig
    from rlfw.envs import EnvSpaces

    box = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    stacked = EnvSpaces(box, gym.spaces.Discrete(3), frame_stack=4)
    channels = EnvSpaces(box, gym.spaces.Discrete(3))
    assert DQNConfig().for_env(stacked).frame_dedup is True
    assert DQNConfig().for_env(channels).frame_dedup is False
    assert DQNConfig(frame_dedup=True).for_env(channels).frame_dedup is True  # the user's word


def test_nested_observations_are_stored_leaf_by_leaf_and_read_back_exactly():
    """A Dict observation (with a Tuple inside) keeps one array per leaf with the leaf's
    dtype; a replay batch returns the observation and its n-step successor as trees, and
    a checkpointed storage restores them."""
    T = 6
    obs = {
        "image": torch.arange(T, dtype=torch.uint8).reshape(T, 1, 1, 1).expand(T, 1, 2, 2),
        "pair": (
            torch.arange(T, dtype=torch.int64).reshape(T, 1),
            torch.arange(T).reshape(T, 1, 1).float() / 2,
        ),
    }
    batch = rows([1.0] * T, [False] * T, [False] * T, obs=obs)
    example = {
        "image": np.zeros((2, 2), np.uint8),
        "pair": (np.zeros((), np.int64), np.zeros((1,), np.float32)),
    }
    storage = RowStorage(T, 1, example, None, (), np.int64)
    assert storage.obs_leaf_0.dtype == np.uint8 and storage.obs_leaf_0.shape == (T, 1, 2, 2)
    assert storage.obs_leaf_1.dtype == np.int64 and storage.obs_leaf_2.dtype == np.float32
    replay = Replay(storage, UniformSampling(0), n_step=2, gamma=0.5)
    replay.append_samples(batch)
    got = replay.batch(np.array([1, 3]))
    assert got.observation["image"][:, 0, 0].tolist() == [1, 3]
    assert got.observation["pair"][0].tolist() == [1, 3]
    assert got.next_observation["pair"][1][:, 0].tolist() == [1.5, 2.5]  # t + 2, halved
    assert got.n_step_return.tolist() == [1.5, 1.5]
    fresh = RowStorage(T, 1, example, None, (), np.int64)
    fresh.load_state_dict(storage.state_dict())
    again = Replay(fresh, UniformSampling(0), n_step=2, gamma=0.5).batch(np.array([1, 3]))
    assert torch.equal(again.next_observation["image"], got.next_observation["image"])


def test_frame_dedup_on_a_nested_observation_is_refused_with_the_way_out():
    from rlfw.algos.dqn.dqn import DQN, DQNConfig

    T = 4
    obs = {"image": torch.zeros(T, 1, 4, 2, 2, dtype=torch.uint8)}
    batch = rows([0.0] * T, [False] * T, [False] * T, obs=obs)
    algo = DQN(DQNConfig(frame_dedup=True))
    with pytest.raises(ValueError, match="nested.*set frame_dedup=false"):
        algo._storage(batch, 8, shared=False)
