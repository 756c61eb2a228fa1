"""Env layer: ids by name, Atari Nature preprocessing, real-episode statistics."""

import numpy as np
import pytest

from rlfw.envs import AtariOptions, EnvFactory, make_env
from rlfw.envs.atari import EpisodicLife, FireReset


def test_any_gymnasium_id_by_name():
    env = make_env("CartPole-v1")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4,)
    env.close()


def test_unknown_env_id_names_it_and_suggests():
    with pytest.raises(ValueError, match=r"unknown env id 'CartPol-v1'.*CartPole-v1"):
        make_env("CartPol-v1")
    with pytest.raises(ValueError, match=r"'ALE/Pongg-v5'.*ALE/Pong-v5"):
        EnvFactory("ALE/Pongg-v5").validate()


def test_atari_observations_are_stacked_uint8_frames():
    env = EnvFactory("ALE/Pong-v5")(train=True)
    obs, _ = env.reset(seed=1)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    assert env.observation_space.shape == (4, 84, 84)
    obs, *_ = env.step(0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    # Pong needs FIRE to serve; the training env has fire-reset and no-op starts.
    names = []
    wrapper = env
    while hasattr(wrapper, "env"):
        names.append(type(wrapper).__name__)
        wrapper = wrapper.env
    assert {
        "FireReset",
        "AtariPreprocessing",
        "EpisodicLife",
        "TransformReward",
        "RecordEpisodeStatistics",
        "FrameStackObservation",
    } <= set(names)
    env.close()


def test_training_env_ends_on_life_loss_with_clipped_rewards_but_stats_are_real_games():
    env = EnvFactory("ALE/SpaceInvaders-v5")(train=True)
    rng = np.random.default_rng(0)
    env.reset(seed=3)
    life_ends, rewards, game = 0, set(), None
    for _ in range(20_000):
        _, reward, terminated, truncated, info = env.step(int(rng.integers(6)))
        rewards.add(reward)
        if "episode" in info:
            game = info["episode"]
            break
        if terminated or truncated:
            life_ends += 1
            env.reset()
    assert game is not None, "no game finished"
    assert rewards <= {0.0, 1.0}  # clipped for training
    assert life_ends >= 2  # SpaceInvaders: 3 lives, each ends an episode
    assert float(game["r"]) >= 5 and float(game["r"]) % 5 == 0  # real, unclipped score
    env.close()


def test_eval_env_plays_whole_games_unclipped():
    env = EnvFactory("ALE/SpaceInvaders-v5")(train=False)
    kinds = set()
    wrapper = env
    while hasattr(wrapper, "env"):
        kinds.add(type(wrapper))
        wrapper = wrapper.env
    assert EpisodicLife not in kinds and FireReset in kinds
    env.reset(seed=0)
    seen = set()
    for _ in range(300):
        _, reward, terminated, truncated, _ = env.step(1)  # FIRE
        seen.add(reward)
        if terminated or truncated:
            break
    assert any(r > 1 for r in seen)
    env.close()


def test_sticky_actions_are_configurable():
    env = EnvFactory("ALE/Pong-v5", atari=AtariOptions(sticky_action_prob=0.25))(train=True)
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    env.close()


@pytest.mark.parametrize(
    "options,message",
    [
        ({"frame_skip": 0}, "atari.frame_skip must be a positive integer, got 0"),
        ({"frame_stack": 0}, "atari.frame_stack must be a positive integer, got 0"),
        ({"screen_size": -84}, "atari.screen_size must be a positive integer, got -84"),
        ({"max_episode_frames": 0}, "atari.max_episode_frames must be a positive integer, got 0"),
        ({"noop_max": -1}, "atari.noop_max must be an integer >= 0, got -1"),
        (
            {"sticky_action_prob": 1.5},
            "atari.sticky_action_prob must be in [0, 1) (the chance an "
            "action repeats the last one), got 1.5",
        ),
    ],
)
def test_bad_atari_options_are_named_before_a_game_starts(options, message):
    factory = EnvFactory("ALE/Pong-v5", atari=AtariOptions(**options))
    with pytest.raises(ValueError) as err:
        factory.validate()
    assert str(err.value) == message
    EnvFactory("ALE/Pong-v5", atari=AtariOptions(noop_max=0, sticky_action_prob=0.25)).validate()


def test_mujoco_engine_warnings_print_once_and_leave_no_log_file(tmp_path):
    """MuJoCo's default handler prints its model-compiler notice for every env made and
    appends it to MUJOCO_LOG.TXT in the working folder; rlfw routes it to ``warnings``."""
    import subprocess
    import sys

    code = (
        "from rlfw.envs.factory import EnvFactory\n"
        "for env_id in ['HalfCheetah-v5'] * 3 + ['Hopper-v5'] * 2:\n"
        "    EnvFactory(env_id)().close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    import mujoco

    # MuJoCo 4 compiles these models with a notice about settotalmass; 3.3 (the version
    # the [robotics] extra pins) with none: once per process, or not at all
    notices = 1 if int(mujoco.__version__.split(".")[0]) >= 4 else 0
    assert done.stderr.count("settotalmass") == notices, done.stderr
    assert ("MujocoWarning" in done.stderr) == bool(notices)
    assert list(tmp_path.iterdir()) == []


def test_an_env_without_a_time_limit_trains_and_its_evaluation_ends(tmp_path):
    """CliffWalking-v1 has no time limit: a greedy policy that walks in a loop never ends
    its episode, so the preset cuts evaluation episodes (counted in eval/episodes_cut)."""
    from rlfw.cli import main
    from rlfw.launch.config import RunConfig
    from rlfw.launch.presets import UNLIMITED_EVAL_CAP

    config = RunConfig.for_env("CliffWalking-v1")
    assert config.schedule.eval_max_episode_steps == UNLIMITED_EVAL_CAP
    assert RunConfig.for_env("CartPole-v1").schedule.eval_max_episode_steps is None
    run = str(tmp_path / "run")
    args = ["train", "--env", "CliffWalking-v1", "--steps", "512", "--eval-every", "256"]
    assert main([*args, "--eval-episodes", "2", "--log-dir", run]) == 0


def test_babyai_levels_are_minigrid_envs_and_box2d_names_its_extra(monkeypatch):
    """BabyAI's levels (registered by the minigrid package) resolve as MiniGrid's family;
    a Box2D env without Box2D installed is one line naming the extra."""
    import importlib.util

    from rlfw.envs import env_family

    EnvFactory("BabyAI-GoToRedBallGrey-v0").validate()
    assert env_family("BabyAI-GoToRedBallGrey-v0") == "minigrid"
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "Box2D" else real(name, *a)
    )
    with pytest.raises(ValueError, match=r"LunarLander-v3.*Box2D.*pip install -e '\.\[box2d\]'"):
        EnvFactory("LunarLander-v3").validate()


def test_an_id_gymnasium_keeps_only_to_say_where_it_went_is_one_line():
    """Hopper-v3 (mujoco-py's) raises ImportError when made: rlfw says it as a ValueError
    the CLI prints in one line, not a traceback. Its text is gymnasium's, or
    gymnasium-robotics' once that package has registered the id again (as the robotics
    tests' imports do): both name mujoco-py's versions."""
    with pytest.raises(
        ValueError, match=r"env 'Hopper-v3' cannot be made here: .*(v2 and v3|mujoco_py)"
    ):
        EnvFactory("Hopper-v3")()
