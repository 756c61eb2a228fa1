"""DQN: exploration, targets, determinism, resume, bad input, Atari smoke, learning."""

import gymnasium as gym
import numpy as np
import psutil
import pytest
import torch

from rlfw.agents.dqn_agent import DqnAgent, apex_epsilons
from rlfw.algos import DQN, DQNConfig
from rlfw.envs import AtariOptions, EnvSpaces
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.runners import RunSchedule

from conftest import bits

CARTPOLE = EnvSpaces(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2))


def small_config(seed=0, itrs=8, **dqn) -> RunConfig:
    config = apply_overrides(RunConfig(algo="dqn", seed=seed), preset("dqn", "CartPole-v1"))
    config.batch_T, config.batch_B = 32, 2
    apply_overrides(
        config,
        {"dqn": dict(learning_starts=64, replay_ratio=0.25, target_update_interval=64, **dqn)},
    )
    per_itr = 64
    config.schedule = RunSchedule(
        n_steps=itrs * per_itr,
        eval_every=4 * per_itr,
        eval_episodes=2,
        log_every=per_itr,
        checkpoint_every=4 * per_itr,
    )
    return config


def test_epsilon_greedy_follows_the_slot_noise_and_per_slot_epsilon():
    torch.manual_seed(0)
    agent = DqnAgent.build(CARTPOLE, batch_B=3)
    agent.set_epsilon(np.array([0.0, 1.0, 0.5]))
    obs = torch.zeros(3, 4)
    greedy = agent.model(obs).argmax(-1)
    noise = torch.tensor([[0.3, 0.9], [0.3, 0.9], [0.6, 0.1]])
    action = agent.step(obs, noise, slots=[0, 1, 2]).action
    # slot 0: ε=0 -> greedy; slot 1: u=0.3 < 1 -> random floor(0.9*2)=1; slot 2: 0.6 > 0.5.
    assert action.tolist() == [greedy[0].item(), 1, greedy[2].item()]
    # The same rows presented as slots [1, 1, 1] all explore.
    assert agent.step(obs, noise, slots=[1, 1, 1]).action.tolist() == [1, 1, 0]
    agent.eval_mode()
    assert torch.equal(agent.step(obs, noise).action, greedy)
    np.testing.assert_allclose(apex_epsilons(3), [0.4, 0.4**4.5, 0.4**8])


def test_epsilon_travels_in_the_state_dict_to_worker_copies():
    agent = DqnAgent.build(CARTPOLE, batch_B=2)
    agent.set_epsilon(0.25)
    copy = DqnAgent.build(CARTPOLE, batch_B=2)
    copy.load_state_dict(agent.state_dict())
    assert copy.model.epsilon.tolist() == [0.25, 0.25]


def test_linear_epsilon_schedule_and_hard_and_soft_target_updates():
    runner = build_runner(
        small_config(exploration_fraction=0.5, epsilon_final=0.1),
        None,
        progress=False,
        stdout=False,
    )
    result = runner.train()
    assert result.iterations == 8
    assert runner.agent.model.epsilon.tolist() == pytest.approx([0.1, 0.1])
    algo = runner.algo
    with torch.no_grad():  # after a hard update the target equals the online net
        algo._update_target()
    assert all(
        torch.equal(t, o) for t, o in zip(algo.target.parameters(), runner.agent.q.parameters())
    )
    soft = DQN(DQNConfig(tau=0.5))
    soft.agent, soft.config = runner.agent, DQNConfig(tau=0.5)
    soft.target = type(algo.target)(CARTPOLE.observation.shape, np.float32, 2, (256, 256))
    before = [p.clone() for p in soft.target.parameters()]
    soft._update_target()
    for b, t, o in zip(before, soft.target.parameters(), runner.agent.q.parameters()):
        assert torch.allclose(t, 0.5 * b + 0.5 * o)


@pytest.mark.parametrize(
    "options", [{}, {"double_dqn": True, "dueling": True, "n_step": 3, "prioritized": True}]
)
def test_same_seed_twice_gives_bitwise_identical_parameters(options):
    params = []
    for _ in range(2):
        runner = build_runner(small_config(itrs=3, **options), None, progress=False, stdout=False)
        runner.train()
        assert runner.algo.updates >= 3
        params.append(dict(runner.agent.state_dict()))
    assert all(torch.equal(bits(params[0][k]), bits(params[1][k])) for k in params[0])


def test_resume_with_saved_replay_is_bitwise_identical(tmp_path, monkeypatch):
    whole = build_runner(
        small_config(save_replay=True, prioritized=True),
        str(tmp_path / "a"),
        progress=False,
        stdout=False,
    )
    whole.train()
    part = build_runner(
        small_config(save_replay=True, prioritized=True),
        str(tmp_path / "b"),
        progress=False,
        stdout=False,
    )
    real = type(part.sampler).obtain_samples

    def interrupt(self, itr):
        if itr == 6:
            raise KeyboardInterrupt
        return real(self, itr)

    monkeypatch.setattr(type(part.sampler), "obtain_samples", interrupt)
    assert part.train().interrupted
    monkeypatch.setattr(type(part.sampler), "obtain_samples", real)
    resumed = build_runner(
        small_config(save_replay=True, prioritized=True),
        str(tmp_path / "b"),
        resume=True,
        progress=False,
        stdout=False,
    )
    resumed.train()
    a, b = whole.agent.state_dict(), resumed.agent.state_dict()
    assert all(torch.equal(bits(a[k]), bits(b[k])) for k in a)
    ta, tb = whole.algo.target.state_dict(), resumed.algo.target.state_dict()
    assert all(torch.equal(bits(ta[k]), bits(tb[k])) for k in ta)


@pytest.mark.parametrize(
    "config,message",
    [
        (DQNConfig(replay_capacity=16, batch_size=32), "replay_capacity = 16 is invalid"),
        (DQNConfig(n_step=0), "n_step = 0 is invalid"),
        (DQNConfig(replay_ratio=0.0), "replay_ratio = 0.0 is invalid"),
        (DQNConfig(tau=0.0), "tau = 0.0 is invalid"),
        (
            DQNConfig(advantage_learning=1.0),
            r"advantage_learning = 1.0 is invalid: must be in \[0, 1\)",
        ),
    ],
)
def test_bad_dqn_config_is_a_clear_error(config, message):
    with pytest.raises(ValueError, match=message):
        DQN(config)


def test_box_action_space_is_refused():
    spaces = EnvSpaces(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (2,)))
    with pytest.raises(
        ValueError, match="not supported by dqn: the Q-learning family needs a Discrete"
    ):
        DqnAgent.build(spaces, batch_B=1)


def test_cli_refuses_dqn_on_a_box_action_env(capsys, tmp_path):
    from rlfw.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--algo", "dqn", "--env", "Pendulum-v1", "--log-dir", str(tmp_path)])
    assert "not supported by dqn" in capsys.readouterr().err


@pytest.mark.parametrize("sampler", ["serial", "native"])
def test_dqn_pong_smoke_with_frame_deduplicated_replay(tmp_path, sampler):
    """The replay keeps one frame per row where it can rebuild the stacks (gymnasium's
    frame stacking); ale-py's native stacks begin with the frames before an episode's
    first, so a native run stores full rows."""
    config = apply_overrides(RunConfig(algo="dqn", env="ALE/Pong-v5"), preset("dqn", "ALE/Pong-v5"))
    config.batch_B, config.batch_T, config.n_eval_envs = 2, 16, 1
    config.sampler = sampler
    apply_overrides(config, {"dqn": dict(learning_starts=32, replay_capacity=1000, batch_size=8)})
    config.atari = AtariOptions(max_episode_frames=400)
    config.schedule = RunSchedule(n_steps=96, eval_every=10_000, eval_episodes=1)
    with build_runner(config, str(tmp_path), progress=False, stdout=False) as runner:
        result = runner.train()
    assert result.iterations == 3 and runner.algo.updates > 0
    stored = "FrameStorage" if sampler == "serial" else "RowStorage"
    assert type(runner.algo.replay.storage).__name__ == stored
    batch = runner.algo.replay.sample(4)
    assert batch.observation.shape == (4, 4, 84, 84) and batch.observation.dtype == torch.uint8


def test_dqn_runs_with_a_parallel_sampler_and_workers_see_epsilon():
    config = small_config(itrs=3, exploration_fraction=0.5, epsilon_final=0.1)
    config.sampler, config.n_workers = "cpu", 2
    with build_runner(config, None, progress=False, stdout=False) as runner:
        result = runner.train()
    assert result.iterations == 3 and runner.algo.updates > 0
    assert runner.sampler.weights["epsilon"].tolist() == pytest.approx(
        runner.agent.model.epsilon.tolist()
    )  # what the workers loaded before the last batch


def test_replay_warns_before_allocating_more_than_available_memory():
    from rlfw.buffers.replay.storage import warn_if_too_big

    with pytest.warns(ResourceWarning, match="needs .* GiB but only"):
        warn_if_too_big(psutil.virtual_memory().available * 2, "replay buffer")


def test_resume_without_saved_replay_warns_that_it_is_not_bitwise(tmp_path):
    build_runner(small_config(itrs=4), str(tmp_path), progress=False, stdout=False).train()
    config = small_config(itrs=6)
    resumed = build_runner(config, str(tmp_path), resume=True, progress=False, stdout=False)
    with pytest.warns(UserWarning, match="no replay buffer .* not bitwise identical"):
        result = resumed.train()
    assert result.iterations == 6 and resumed.algo.replay is not None


def test_evaluation_epsilon_acts_on_the_eval_noise_only_in_eval_mode():
    agent = DqnAgent.build(CARTPOLE, batch_B=2, eval_epsilon=0.05)
    agent.set_epsilon(1.0)
    obs = torch.zeros(4, 4)
    greedy_action = agent.q(obs).argmax(-1)
    explore = torch.tensor([[0.01, 0.99]] * 4)  # u_explore < 0.05: random action n-1
    keep = torch.tensor([[0.5, 0.99]] * 4)  # u_explore > 0.05: the argmax
    agent.eval_mode()
    assert agent.step(obs, explore).action.tolist() == [1] * 4
    assert torch.equal(agent.step(obs, keep).action, greedy_action)
    agent.sample_mode()  # training ε (1.0) applies again
    assert agent.step(obs[:2], keep[:2]).action.tolist() == [1, 1]
    with pytest.raises(ValueError, match="eval_epsilon = 1.5 is invalid"):
        DqnAgent.build(CARTPOLE, batch_B=1, eval_epsilon=1.5)


def test_advantage_learning_lowers_the_target_of_a_worse_action_by_alpha_times_its_gap():
    """Terminal transitions (target = reward 5), Q_target(s) = (1, 3), online Q = 0 (so the
    |TD error| is the target): taking action 0 (gap 2) the target is 5 - 0.5 x 2; the greedy
    action 1 keeps 5."""
    algo = DQN(DQNConfig(advantage_learning=0.5))
    spaces = EnvSpaces(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2))
    algo.initialize(DqnAgent.build(spaces, batch_B=1, hidden=(4,)), n_itr=1)
    with torch.no_grad():  # all weights 0: Q is the last layer's bias
        for p in [*algo.target.parameters(), *algo.agent.q.parameters()]:
            p.zero_()
        last = [m for m in algo.target.modules() if isinstance(m, torch.nn.Linear)][-1]
        last.bias.copy_(torch.tensor([1.0, 3.0]))
    obs = torch.zeros(2, 2)
    _, _, target = algo._losses(
        obs,
        obs,
        torch.tensor([0, 1]),
        torch.tensor([5.0, 5.0]),
        torch.zeros(2),
        torch.zeros(2, dtype=torch.bool),
        torch.zeros(2),
        torch.ones(2),
    )
    assert target.tolist() == [4.0, 5.0]
