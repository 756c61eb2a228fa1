"""MinAtar through rlfw's env layer: registered on import, channels-first uint8, the small
CNN by input size, every sampler equal to the serial one, and a run end to end."""

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from minatar.gym import BaseEnv
from test_samplers import ALL, collect

from rlfw.agents import ActorCriticAgent
from rlfw.agents.random_agent import RandomAgent
from rlfw.envs import EnvFactory, EnvSpaces, env_family
from rlfw.envs.minatar import GAMES, MAX_EPISODE_STEPS, minatar_id
from rlfw.launch.config import RunConfig
from rlfw.models.cnn import NatureCNN, SmallCNN, image_torso
from rlfw.models.q_network import QNetwork

from conftest import trees_equal


def test_the_games_are_registered_by_importing_rlfw_alone():
    code = (
        "import gymnasium, rlfw; print(sorted(i for i in gymnasium.registry "
        "if i.startswith('MinAtar/')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert eval(out) == sorted(minatar_id(name) for name in GAMES)
    assert gym.spec("MinAtar/Breakout-v1").max_episode_steps == MAX_EPISODE_STEPS


def test_making_a_game_leaves_seaborn_unimported_until_a_frame_is_drawn():
    """MinAtar's module imports seaborn (1.2 s of CPU) for its palette alone: every process
    that makes a game, each sampler worker, skips it; an rgb_array frame still draws."""
    code = (
        "import sys, gymnasium, rlfw; env = gymnasium.make('MinAtar/Breakout-v1', "
        "render_mode='rgb_array'); env.reset(seed=0); env.step(0); "
        "before = 'seaborn' in sys.modules; frame = env.render(); "
        "print(before, 'seaborn' in sys.modules, frame.shape, int(frame.max()) > 0)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    assert out == ["False", "True", "(160,", "160,", "3)", "True"]


@pytest.mark.parametrize("name", list(GAMES))
def test_observations_are_minatar_s_channels_first_as_uint8(name):
    """Step for step against MinAtar's own env with the same seed and actions."""
    ours = EnvFactory(minatar_id(name))(True)
    theirs = BaseEnv(GAMES[name], use_minimal_action_set=True)
    channels = theirs.observation_space.shape[2]
    assert ours.observation_space == gym.spaces.Box(0, 255, (channels, 10, 10), np.uint8)
    assert ours.action_space == theirs.action_space
    obs, _ = ours.reset(seed=3)
    raw, _ = theirs.reset(seed=3)
    actions = np.random.default_rng(0).integers(ours.action_space.n, size=300)
    seen = 0
    for action in actions:
        assert obs.dtype == np.uint8 and obs.shape == (channels, 10, 10)
        assert raw.dtype == bool
        assert np.array_equal(obs, raw.transpose(2, 0, 1).astype(np.uint8) * 255)
        seen += int(raw.any())
        obs, reward, terminated, truncated, _ = ours.step(action)
        raw, raw_reward, raw_terminated, _, _ = theirs.step(action)
        assert (reward, terminated) == (raw_reward, raw_terminated)
        if terminated or truncated:
            obs, _ = ours.reset(seed=int(action))
            raw, _ = theirs.reset(seed=int(action))
    assert seen > 0  # the grids were not all empty


def test_auto_picks_the_small_cnn_by_input_size_for_every_agent():
    spaces = EnvSpaces.of(EnvFactory("MinAtar/SpaceInvaders-v1"))
    assert env_family("MinAtar/SpaceInvaders-v1") == "minatar"
    actor_critic = ActorCriticAgent.build(spaces)
    assert isinstance(actor_critic.model.torso, SmallCNN)
    convs = [m for m in actor_critic.model.torso.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size, c.stride) for c in convs] == [(16, (3, 3), (1, 1))]
    assert actor_critic.model.torso.out_dim == 128
    q = QNetwork(spaces.observation.shape, np.uint8, int(spaces.action.n))
    assert isinstance(q.torso, SmallCNN)
    recurrent = ActorCriticAgent.build(spaces, recurrent="lstm")
    assert isinstance(recurrent.model.actor.features, SmallCNN)
    # the rule is the size, not the env: any small image gets it, Atari frames do not
    assert isinstance(image_torso((2, 20, 30)), SmallCNN)
    assert isinstance(image_torso((4, 84, 84)), NatureCNN)
    with pytest.raises(ValueError, match="too small for a 3x3 convolution"):
        image_torso((1, 2, 2))


@pytest.mark.parametrize("kind", list(ALL))
@pytest.mark.integration
def test_every_sampler_equals_the_serial_one_on_a_minatar_game(kind):
    factory = EnvFactory("MinAtar/Breakout-v1")
    agent = RandomAgent(EnvSpaces.of(factory).action)
    with ALL["serial"](factory, 64, 4, 7) as reference:
        expected = collect(reference, agent, 3)
    with ALL[kind](factory, 64, 4, 7) as sampler:
        got = collect(sampler, agent, 3)
    for (exp_samples, exp_eps), (got_samples, got_eps) in zip(expected, got):
        assert trees_equal(exp_samples, got_samples) and exp_eps == got_eps
    assert sum(len(eps) for _, eps in expected) > 0  # Breakout episodes ended inside


@pytest.mark.parametrize("algo", ["ppo", "a2c", "dqn"])
def test_the_presets_are_minatar_s(algo):
    config = RunConfig.for_env("MinAtar/Breakout-v1", algo)
    assert config.schedule.n_steps == 1_000_000
    expected = {"ppo": (64, 128), "a2c": (16, 5), "dqn": (1, 32)}[algo]
    assert (config.batch_B, config.batch_T) == expected
    if algo == "dqn":  # MinAtar's reference DQN
        d = config.dqn
        assert (
            d.learning_rate,
            d.optimizer,
            d.replay_capacity,
            d.learning_starts,
            d.target_update_interval,
            d.replay_ratio,
            d.epsilon_final,
        ) == (2.5e-4, "rmsprop", 100_000, 5_000, 1_000, 1.0, 0.1)


@pytest.mark.integration
def test_train_resume_and_eval_a_minatar_run_from_the_cli(tmp_path):
    run = tmp_path / "run"
    common = [sys.executable, "-m", "rlfw"]
    train = [
        *common,
        "train",
        "--algo",
        "ppo",
        "--env",
        "MinAtar/Breakout-v1",
        "--sampler",
        "cpu",
        "--n-workers",
        "2",
        "--batch-B",
        "4",
        "--batch-T",
        "32",
        "--eval-every",
        "256",
        "--eval-episodes",
        "2",
        "--checkpoint-every",
        "256",
        "--no-progress",
        "--log-dir",
        str(run),
    ]
    done = subprocess.run([*train, "--steps", "256"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    resumed = subprocess.run(
        [*common, "train", "--resume", str(run), "--steps", "512", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    rows = (run / "progress.csv").read_text().splitlines()
    assert rows[-1].split(",")[0] == "512"  # the step column
    assert json.loads((run / "config.json").read_text())["env"] == "MinAtar/Breakout-v1"
    shown = subprocess.run(
        [*common, "eval", str(run), "--episodes", "2"], capture_output=True, text=True, timeout=300
    )
    assert shown.returncode == 0 and "mean return" in shown.stdout, shown.stderr


def test_dqn_replays_minatar_observations_exactly_as_they_were_sampled():
    """MinAtar's uint8 [C, 10, 10] looks like Atari's frame stack but its channels are
    object maps: a frame-deduplicated replay rebuilt them from other steps' last channel,
    and DQN learned nothing. The env says it stacks no frames; replay keeps whole rows."""
    from rlfw.launch.build import build_algo
    from rlfw.samplers import SerialSampler

    config = RunConfig.for_env("MinAtar/Breakout-v1", algo="dqn")
    factory = config.env_factory()
    spaces = EnvSpaces.of(factory)
    assert spaces.frame_stack == 1
    algo = build_algo(config, spaces)
    with SerialSampler(factory, batch_T=32, batch_B=2, seed=0) as sampler:
        sampler.initialize(RandomAgent(spaces.action))
        samples, _ = sampler.obtain_samples(0)
    replay = algo.make_replay(samples, seed=0)
    replay.append_samples(samples)
    assert type(replay.storage).__name__ == "RowStorage"
    rows = np.arange(31)
    stored = replay.storage.observations(rows, np.ones(31, dtype=int))
    assert np.array_equal(stored, samples.observation[:31, 1].numpy())
