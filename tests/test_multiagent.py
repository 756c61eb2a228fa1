"""Many-agent envs as columns (``rlfw.envs.multiagent``): each (env, agent) pair is one
column of the batch, through every sampler and runner."""

import numpy as np
import pytest
import torch

from rlfw.buffers import tree_map
from rlfw.envs import EnvFactory, EnvOptions
from rlfw.envs.multiagent import ParallelColumns
from rlfw.samplers import SerialSampler
from rlfw.samplers.machinery.evaluation import Evaluator
from rlfw.testing import CountingAgent, CountingAgentsGame, counting_agents_env

from conftest import sampler_kinds, trees_equal

# rlfw's parallel samplers; the test plugin's strided sampler refuses many-agent envs
PARALLEL = {
    name: make for name, make in sampler_kinds().items() if name not in ("serial", "interleaved")
}


def collect(sampler, agent, n_batches):
    sampler.initialize(agent)
    return [
        (tree_map(torch.clone, samples), sorted(episodes))
        for samples, episodes in (sampler.obtain_samples(itr) for itr in range(n_batches))
    ]


FACTORY = EnvFactory("counting-agents", entry=counting_agents_env)


def test_columns_hold_each_agent_s_steps_and_an_agent_that_left_adds_no_reward():
    """One env of two agents, by hand: episode 0 lasts 3 steps and the second agent leaves
    after 2 (its end reported once, then ended rows of reward 0 until the env resets);
    episode 1 (5 steps) truncates both; each env episode reports the team return."""
    with SerialSampler(FACTORY, 8, 2, seed=3) as sampler:
        samples, episodes = collect(sampler, CountingAgent(), 1)[0]
    reward = samples.reward.numpy()
    np.testing.assert_array_equal(reward[:, 0], [1, 2, 3, 1, 2, 3, 4, 5])
    np.testing.assert_array_equal(reward[:, 1], [2, 4, 0, 2, 4, 0, 0, 0])
    np.testing.assert_array_equal(samples.terminated.numpy()[:, 1], [0, 1, 1, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(samples.terminated.numpy()[:, 0], [0, 0, 1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(samples.truncated.numpy()[:, 0], [0, 0, 0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(samples.valid.numpy()[:, 1], [1, 1, 0, 1, 1, 0, 0, 0])
    assert samples.valid[:, 0].all()
    tags = samples.observation[0, :, 0].numpy()
    assert tags[1] - tags[0] == 1000  # the second column is the second agent
    assert [(e.ret, e.length, e.slot) for e in episodes] == [
        (1 + 2 + 3 + 2 + 4, 3, 0),
        (15 + 6, 5, 0),
    ]


@pytest.mark.parametrize("kind", list(PARALLEL))
def test_many_agent_columns_equal_the_serial_samplers_exactly(kind):
    """Two envs of two agents over two workers (each holds whole envs), agents leaving
    early, terminated and truncated ends: every sampler's arrays as the serial one's."""
    with SerialSampler(FACTORY, 7, 4, seed=11) as reference:
        expected = collect(reference, CountingAgent(), 3)
    with PARALLEL[kind](FACTORY, 7, 4, 11) as sampler:
        got = collect(sampler, CountingAgent(), 3)
    for (exp_samples, exp_eps), (got_samples, got_eps) in zip(expected, got):
        assert trees_equal(exp_samples, got_samples)
        assert exp_eps == got_eps


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_an_absent_agent_s_rows_add_nothing_to_the_update(algo):
    """After its agent left, a column's rows (``valid`` False) are left out of the loss:
    filling them with other observations, actions and sampling-time outputs changes no bit
    of the update; without ``valid`` the same change moves the weights."""
    import gymnasium as gym

    from rlfw.agents import ActorCriticAgent
    from rlfw.algos.pg import A2C, PPO, A2CConfig, PPOConfig
    from rlfw.envs import EnvSpaces

    spaces = EnvSpaces(gym.spaces.Box(-np.inf, np.inf, (3,), np.float32), gym.spaces.Discrete(3))
    torch.manual_seed(0)
    agent = ActorCriticAgent.build(spaces)
    with SerialSampler(FACTORY, 8, 4, seed=3) as sampler:
        samples = collect(sampler, agent, 1)[0][0]
    absent = ~samples.valid
    assert absent.any()
    scribbled = tree_map(torch.clone, samples)
    scribbled.observation[absent] = 7.0
    scribbled.action[absent] = 2
    scribbled.agent_info.logp[absent] = -0.1
    scribbled.agent_info.value[absent] = 3.0

    def update(batch):
        torch.manual_seed(1)
        learner = ActorCriticAgent.build(spaces)
        make = {
            "ppo": lambda: PPO(PPOConfig(epochs=2, minibatch_size=8)),
            "a2c": lambda: A2C(A2CConfig()),
        }
        algorithm = make[algo]()
        algorithm.initialize(learner, n_itr=1)
        algorithm.optimize(batch, 0)
        return learner.state_dict()

    assert trees_equal(update(samples), update(scribbled))
    unmasked = update(scribbled._replace(valid=None))
    assert not trees_equal(update(samples._replace(valid=None)), unmasked)


def test_evaluation_plays_whole_envs_and_returns_team_episodes():
    evaluator = Evaluator(FACTORY, 2, seed=0)
    try:
        episodes = evaluator.run(CountingAgent(), 3)
    finally:
        evaluator.close()
    assert sorted((e.ret, e.length, e.slot) for e in episodes) == [
        (12.0, 3, 0),
        (12.0, 3, 1),
        (21.0, 5, 0),
    ]


def test_slots_that_split_an_env_name_the_agents_per_env():
    with pytest.raises(ValueError, match="batch_B=3 is not a whole number of envs of 2 agents"):
        PARALLEL["cpu"](FACTORY, 4, 3, 0, n_workers=1)
    with pytest.raises(ValueError, match="3 slots do not hold whole envs of 2 agents"):
        SerialSampler(FACTORY, 4, 3).initialize(CountingAgent())


def test_agents_of_different_spaces_without_groups_are_one_line():
    class Mixed(CountingAgentsGame):
        def action_space(self, agent):
            import gymnasium as gym

            return gym.spaces.Discrete(3 if agent == "first" else 4)

    with pytest.raises(ValueError, match=r"mixed's agents have different spaces \(first: .*"):
        ParallelColumns(Mixed, "mixed")


def test_a_module_outside_the_pettingzoo_families_needs_the_command_line():
    with pytest.raises(ValueError, match=r"--plugin mypkg\.my_game"):
        EnvFactory("mypkg.my_game").validate()


@pytest.mark.parametrize("algo", ["ippo", "mappo"])
def test_mpe_simple_spread_trains_bitwise_equal_through_the_cpu_sampler(algo):
    """MPE's simple_spread (3 agents as 3 columns of each env), one policy shared by the
    agents (MAPPO's critic on the env's state): two updates through the cpu sampler end
    with the serial sampler's weights."""
    from rlfw.launch.build import build_runner
    from rlfw.launch.config import RunConfig
    from rlfw.runners import RunSchedule

    weights = {}
    for sampler in ("serial", "cpu"):
        workers = {} if sampler == "serial" else {"n_workers": 2}
        config = RunConfig.for_env(
            "mpe2.simple_spread_v3", algo, sampler=sampler, batch_B=6, batch_T=16, **workers
        )
        config.schedule = RunSchedule(n_steps=2 * 16 * 6, eval_every=None, log_every=10_000)
        runner = build_runner(config, None, progress=False, stdout=False)
        with runner:
            runner.train()
        weights[sampler] = {k: v.clone() for k, v in runner.agent.state_dict().items()}
    assert trees_equal(weights["serial"], weights["cpu"])


def test_mappo_on_an_env_without_a_global_state_is_one_line():
    from rlfw.launch.build import build_runner
    from rlfw.launch.config import RunConfig

    with pytest.raises(
        ValueError, match="mappo's critic reads the env's global state, and CartPole"
    ):
        build_runner(RunConfig.for_env("CartPole-v1", "mappo"), None, progress=False, stdout=False)


def test_mappo_s_agents_observe_their_own_view_the_state_and_their_id():
    env = EnvFactory("mpe2.simple_spread_v3", options=EnvOptions(global_state=True))()
    rows, _ = env.reset(seed=0)
    assert [sorted(r) for r in rows] == [["agent", "observation", "state"]] * 3
    assert rows[1]["agent"].tolist() == [0, 1, 0]
    np.testing.assert_array_equal(rows[0]["state"], rows[2]["state"])
    np.testing.assert_array_equal(rows[0]["state"][18:36], rows[1]["observation"])


def test_check_env_names_the_agents_their_columns_and_the_state():
    from rlfw.launch.check_env import check_env

    report = check_env(FACTORY, episodes=2)
    assert report.ok, report.problems
    text = "\n".join(report.lines)
    assert "agents 2 (first, second)" in text and "batch_B a multiple of 2" in text
    assert "state(): [3] -> mappo's critic input" in text
    assert "replays the same 50 steps: deterministic" in text


def test_the_env_s_own_arguments_reach_it_and_its_agents_size_the_batch():
    from rlfw.launch.config import RunConfig

    config = RunConfig.for_env("mpe2.simple_spread_v3", "ippo", env_options={"kwargs": ("N=4",)})
    assert config.batch_B == 8 * 4  # the family's 8 envs, of 4 agents now
    assert config.env_factory()().columns == 4
    assert RunConfig.for_env("mpe2.simple_spread_v3", "ippo", batch_B=6).batch_B == 6
    with pytest.raises(ValueError, match="item 'N:4' is not KEY=VALUE"):
        EnvOptions(kwargs=("N:4",)).validate()
