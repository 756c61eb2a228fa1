"""Envs from outside: PettingZoo's connect four against a fixed opponent, MiniGrid's tile
codes and its family preset."""

import gymnasium as gym
import numpy as np
import pytest

import rlfw.envs  # noqa: F401  (registers rlfw/ConnectFour-v0)
from rlfw.envs import CONNECT_FOUR, EnvFactory, EnvSpaces
from rlfw.envs.boards import connect_four
from rlfw.launch.config import RunConfig, apply_overrides, preset


def _play(env, seed, pick):
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(pick(obs))
        total += reward
        done = terminated or truncated
    return total


def test_connect_four_from_the_learners_seat_scores_wins_and_losses():
    env = gym.make(CONNECT_FOUR)
    rng = np.random.default_rng(0)
    results = [
        _play(env, k, lambda o: rng.choice(np.flatnonzero(o["action_mask"]))) for k in range(60)
    ]
    assert set(results) <= {-1.0, 0.0, 1.0} and {-1.0, 1.0} <= set(results)
    # the first seat stacking one column beats an opponent that never blocks it
    column = connect_four(opponent=lambda obs: int(np.flatnonzero(obs["action_mask"])[-1]))
    assert _play(column, 0, lambda o: 0) == 1.0
    # a user's opponent that takes column 0 first wins from the first seat itself
    second = connect_four(opponent=lambda obs: 0, learner_first=False)
    obs, _ = second.reset(seed=0)
    assert obs["observation"][:, 0].sum() == 1  # the opponent has opened in column 0
    assert _play(second, 0, lambda o: 6) == -1.0


def test_connect_four_is_seeded_by_reset():
    env = gym.make(CONNECT_FOUR)
    first = [_play(env, 3, lambda o: int(np.flatnonzero(o["action_mask"])[0])) for _ in range(2)]
    assert first[0] == first[1]
    spaces = EnvSpaces.of(EnvFactory(CONNECT_FOUR).resolved())
    assert "action_mask" in spaces.observation.spaces


def test_minigrid_reads_tile_codes_and_its_preset_drops_the_mission():
    env_id = "MiniGrid-DoorKey-5x5-v0"
    config = apply_overrides(RunConfig(env=env_id), preset("ppo", env_id))
    assert config.env_options.drop_keys == ("mission",)
    spaces = EnvSpaces.of(config.env_factory().resolved())
    image = spaces.observation["image"]
    assert isinstance(image, gym.spaces.MultiDiscrete) and image.shape == (7, 7, 3)
    assert sorted(spaces.observation.spaces) == ["direction", "image"]
    with pytest.raises(ValueError, match="'mission'.*drop_keys=mission"):
        from rlfw.agents import ActorCriticAgent

        ActorCriticAgent.build(EnvSpaces.of(EnvFactory(env_id)))
