"""A sampling-time forward pass gives each row the same bits however many rows one call
has (``rlfw.agents.base.invariant_rows``), so every sampler, whatever share of the slots
its calls hold, records the serial sampler's batches and ends with its weights, bit for
bit."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfw.agents import ActorCriticAgent
from rlfw.buffers import tree_map
from rlfw.envs import EnvFactory, EnvSpaces
from rlfw.launch.build import build_algo, build_runner, build_sampler
from rlfw.launch.config import RunConfig
from rlfw.runners import RunSchedule, SyncRunner
from rlfw.testing import NestedCountingEnv

from conftest import trees_equal


def _image(channels: int, size: int) -> gym.spaces.Box:
    return gym.spaces.Box(0, 255, (channels, size, size), np.uint8)


# Each agent kind's smallest network that shows the effect: every one of them gave 2-row
# calls other bits than a 4-row call before the padding (MKL's sgemm and sgemv, oneDNN).
AGENTS = {
    "mlp": (gym.spaces.Box(-1, 1, (4,), np.float32), {}),
    "minatar-cnn": (_image(4, 10), {}),
    "nature-cnn": (_image(4, 84), {}),
    "dict-with-image": (
        gym.spaces.Dict({"image": _image(3, 7), "pos": gym.spaces.Box(-1, 1, (2,), np.float32)}),
        {},
    ),
    "lstm": (gym.spaces.Box(-1, 1, (4,), np.float32), {"recurrent": "lstm", "rnn_size": 20}),
    "gru-cnn": (_image(4, 10), {"recurrent": "gru", "rnn_size": 20}),
}

# How the cpu sampler's workers (B=4 over 2 workers: 2 + 2; B=5: 3 + 2), the alternating
# sampler's groups and a truncated slot's bootstrap (1 row) cut a row of 4.
SPLITS = [(2, 2), (3, 1), (1, 3), (1, 1, 1, 1)]


def _rows(space: gym.Space, n: int, rng: np.random.Generator):
    if isinstance(space, gym.spaces.Dict):
        return {key: _rows(leaf, n, rng) for key, leaf in space.spaces.items()}
    assert isinstance(space, gym.spaces.Box)
    if space.dtype == np.uint8:
        return torch.as_tensor(rng.integers(0, 256, (n, *space.shape), dtype=np.uint8))
    return torch.as_tensor(rng.uniform(-1, 1, (n, *space.shape)).astype(np.float32))


@pytest.mark.parametrize("kind", list(AGENTS))
def test_a_row_gets_the_same_bits_in_any_share_of_the_call(kind):
    """``step`` (action, log-prob, value, next state) and ``value`` on 4 rows, bitwise
    row by row, as on each share of those rows a worker, a group or a bootstrap gets."""
    space, settings = AGENTS[kind]
    torch.manual_seed(0)
    agent = ActorCriticAgent.build(EnvSpaces(space, gym.spaces.Discrete(3)), **settings)
    agent.sample_mode()
    rng = np.random.default_rng(0)
    obs = _rows(space, 4, rng)
    noise = torch.as_tensor(rng.uniform(size=(4, *agent.noise_shape)).astype(np.float32))
    state = agent.initial_state(4)
    if state is not None:  # a state a few steps into an episode, not zeros
        state = torch.as_tensor(rng.normal(size=tuple(state.shape)).astype(np.float32))

    def run(rows: slice) -> tuple:
        part = tree_map(lambda x: x[rows].clone(), obs)
        held = None if state is None else state[rows].clone()
        step = agent.step(part, noise[rows].clone(), None, held)
        return step.action, step.info.logp, step.info.value, step.state, agent.value(part, held)

    whole = run(slice(0, 4))
    for split in SPLITS:
        begin = 0
        for size in split:
            rows = slice(begin, begin + size)
            got = run(rows)
            assert trees_equal(got, tree_map(lambda x: x[rows], whole)), (split, rows)
            begin += size


@pytest.mark.parametrize(
    "kind,settings",
    [
        ("mlp", {"dueling": True}),
        ("mlp", {"atoms": 51}),
        ("mlp", {"layer_norm": True}),  # PQN's
        ("minatar-cnn", {}),
    ],
)
def test_a_q_agent_s_row_gets_the_same_bits_in_any_share_of_the_call(kind, settings):
    """The Q-learners' agents (DQN's dueling head, C51's distributions, PQN's LayerNorm
    MLP, the MinAtar CNN): greedy Q-values and ``value`` per row as in the whole call."""
    from rlfw.agents.dqn_agent import DqnAgent

    space, _ = AGENTS[kind]
    torch.manual_seed(0)
    agent = DqnAgent.build(EnvSpaces(space, gym.spaces.Discrete(3)), 4, hidden=(32,), **settings)
    agent.set_epsilon(0.0)
    agent.sample_mode()
    obs = _rows(space, 4, np.random.default_rng(0))
    noise = torch.zeros(4, *agent.noise_shape)

    def run(rows: slice) -> tuple:
        part = obs[rows].clone()
        step = agent.step(part, noise[rows].clone(), list(range(4))[rows])
        return step.action, step.info.value, agent.value(part)

    whole = run(slice(0, 4))
    for split in SPLITS:
        begin = 0
        for size in split:
            rows = slice(begin, begin + size)
            assert trees_equal(run(rows), tree_map(lambda x: x[rows], whole)), (split, rows)
            begin += size


def test_an_mlp_row_gets_the_same_bits_in_calls_of_every_size_up_to_17():
    """Beyond the splits of 4: calls of n rows for every n to 17 (the rows mod 4 that
    MKL's sgemv computes apart included) against one call of 34 rows."""
    space = gym.spaces.Box(-1, 1, (4,), np.float32)
    torch.manual_seed(0)
    agent = ActorCriticAgent.build(EnvSpaces(space, gym.spaces.Discrete(3)))
    agent.sample_mode()
    obs = _rows(space, 34, np.random.default_rng(1))
    whole = agent.value(obs)
    for n in range(1, 18):
        parts = [agent.value(obs[begin : begin + n].clone()) for begin in range(0, 34, n)]
        assert torch.equal(torch.cat(parts).view(torch.int32), whole.view(torch.int32)), n


def test_greedy_evaluation_runs_its_own_rows_and_sampling_the_padded_floor():
    """Evaluation (greedy, the same calls under every sampler) skips the padding a 1-env
    sampling call pays: the network sees 1 row, not ``MIN_ROWS``."""
    from rlfw.agents.base import MIN_ROWS
    from rlfw.agents.dqn_agent import DqnAgent

    space = gym.spaces.Box(-1, 1, (4,), np.float32)
    spaces = EnvSpaces(space, gym.spaces.Discrete(3))
    for agent in (ActorCriticAgent.build(spaces), DqnAgent.build(spaces, 1, hidden=(8,))):
        seen: list[int] = []
        agent.model.register_forward_pre_hook(lambda _, args: seen.append(len(args[0])))
        obs, noise = torch.zeros(1, 4), torch.zeros(1, *agent.noise_shape)
        agent.sample_mode()
        agent.step(obs, noise)
        agent.eval_mode()
        agent.step(obs, noise)
        assert seen == [MIN_ROWS, 1], type(agent).__name__


# -- whole runs: every sampler records the serial sampler's batches and ends with its weights

SAMPLERS = ["cpu", "gpu", "alternating", "queue"]
BATCHES, T, B = 2, 16, 4

Run = tuple[list, dict[str, torch.Tensor]]  # each batch's samples, the final weights


def _train(runner) -> Run:
    """Train ``runner`` to its end, keeping a copy of every batch the sampler handed over."""
    batches, optimize = [], runner.algo.optimize

    def keep(samples, itr):
        batches.append(tree_map(torch.clone, samples))
        return optimize(samples, itr)

    runner.algo.optimize = keep
    with runner:
        runner.train()
    return batches, {k: v.clone() for k, v in runner.agent.state_dict().items()}


def _minatar_run(sampler: str, **settings) -> Run:
    """PPO on MinAtar Breakout (its preset's CNN agent), B=4, two batches."""
    workers = {} if sampler == "serial" else {"n_workers": 2}
    config = RunConfig.for_env(
        "MinAtar/Breakout-v1", "ppo", sampler=sampler, batch_B=B, batch_T=T, **workers, **settings
    )
    config.schedule = RunSchedule(n_steps=BATCHES * T * B, eval_every=None, log_every=10_000)
    return _train(build_runner(config, None, progress=False, stdout=False))


def _nested_run(sampler: str) -> Run:
    """PPO on ``NestedCountingEnv``: a Dict observation with a uint8 image leaf (the CNN
    torso) beside code, flag and float leaves; its truncated episodes bootstrap 1-3 rows."""
    workers = {} if sampler == "serial" else {"n_workers": 2}
    config = RunConfig(algo="ppo", sampler=sampler, batch_B=B, batch_T=T, **workers)
    config.schedule = RunSchedule(n_steps=BATCHES * T * B, eval_every=None, log_every=10_000)
    factory = EnvFactory("nested-counting", entry=NestedCountingEnv)
    spaces = EnvSpaces.of(factory)
    torch.manual_seed(0)
    agent = ActorCriticAgent.build(spaces)
    algo, made = build_algo(config, spaces), build_sampler(config, factory)
    return _train(SyncRunner(algo, agent, made, config.schedule, progress=False, stdout=False))


def _assert_same(got: Run, expected: Run) -> None:
    """The same batches (logp, value and bootstrap values first: a whole run's bits follow
    from them), then the same weights."""
    assert len(got[0]) == len(expected[0]) == BATCHES
    for mine, theirs in zip(got[0], expected[0]):
        assert trees_equal(mine.agent_info, theirs.agent_info)
        assert trees_equal(mine.bootstrap_value, theirs.bootstrap_value)
        assert trees_equal(mine, theirs)
    assert got[1].keys() == expected[1].keys()
    assert all(trees_equal(got[1][k], expected[1][k]) for k in got[1])


@pytest.fixture(scope="module")
def serial_minatar() -> Run:
    return _minatar_run("serial")


@pytest.fixture(scope="module")
def serial_nested() -> Run:
    run = _nested_run("serial")
    assert sum(int(s.truncated.sum()) for s in run[0]) >= 2  # bootstraps of some rows
    return run


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_ppo_on_minatar_records_and_ends_as_the_serial_sampler(sampler, serial_minatar):
    _assert_same(_minatar_run(sampler), serial_minatar)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_ppo_on_a_dict_with_an_image_records_and_ends_as_the_serial_sampler(sampler, serial_nested):
    _assert_same(_nested_run(sampler), serial_nested)


def test_a_recurrent_cnn_run_with_the_cpu_sampler_records_and_ends_as_the_serial_one():
    """A real LSTM (no elementwise stand-in) over the MinAtar CNN: 2 + 2 rows a worker."""
    settings = {"recurrent": "lstm", "rnn_size": 16}
    _assert_same(_minatar_run("cpu", **settings), _minatar_run("serial", **settings))


@pytest.mark.integration
def test_native_groups_give_a_nature_cnn_agent_the_same_samples():
    """The native sampler's groups change only how many rows a forward pass gets (5 games:
    5, 3 + 2, or 2 + 2 + 1 rows): with the Nature CNN the samples stay the same bits."""
    from rlfw.samplers import NativeAtariSampler

    factory = EnvFactory("ALE/SpaceInvaders-v5")
    runs = []
    for n_groups in (1, 2, 3):
        torch.manual_seed(0)
        agent = ActorCriticAgent.build(EnvSpaces.of(factory))
        with NativeAtariSampler(factory, T, 5, seed=3, n_groups=n_groups) as sampler:
            sampler.initialize(agent)
            runs.append(tree_map(torch.clone, sampler.obtain_samples(0)[0]))
    assert trees_equal(runs[0], runs[1]) and trees_equal(runs[0], runs[2])
