"""``rlfw check-env``: a sound env passes with its mapping shown; each kind of problem is
one line naming what is wrong."""

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlfw.cli import main
from rlfw.envs import EnvFactory
from rlfw.launch.check_env import check_env
from rlfw.testing import NestedCountingEnv, TextLeafEnv


class _Broken(gym.Env):
    """A Box(0, 1, (2,)) float32 env whose ``flaw`` breaks one promise."""

    def __init__(self, flaw: str = ""):
        self.flaw = flaw
        self.observation_space = gym.spaces.Box(0, 1, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._t = 0

    def _obs(self) -> Any:
        if self.flaw == "outside":
            return np.full(2, 3.0, np.float32)
        if self.flaw == "dtype":
            return np.zeros(2, np.float64)
        if self.flaw == "unseeded":
            return np.random.default_rng().random(2).astype(np.float32)
        return np.full(2, 0.5, np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        info = {"action_mask": np.ones(3, np.int8)} if self.flaw == "mask" else {}
        return self._obs(), info

    def step(self, action):
        self._t += 1
        info = {"action_mask": np.ones(3, np.int8)} if self.flaw == "mask" else {}
        return self._obs(), 1.0, self._t >= 5, False, info


def _check(flaw: str):
    return check_env(EnvFactory(f"broken-{flaw}", entry=lambda: _Broken(flaw)), episodes=2)


def test_a_sound_nested_env_passes_and_shows_each_leaf():
    report = check_env(EnvFactory("nested", entry=NestedCountingEnv))
    text = "\n".join(report.lines)
    assert report.ok, report.problems
    assert "step: Discrete(7) -> buffer int64 [], model: one-hot (7)" in text
    assert "grid: Box(0 to 255, [2, 3, 3], uint8) -> buffer uint8 [2, 3, 3], model: small" in text
    assert "pair.0: MultiDiscrete([4 5]) -> buffer int64 [2], model: one-hot (9)" in text
    assert "pair.1: Box(0 to 1, [1], bool) -> buffer bool [1]" in text
    assert "deterministic" in text


@pytest.mark.parametrize(
    "flaw,message",
    [
        ("outside", "observation = [3.0, 3.0] is outside Box(0.0, 1.0, (2,), float32)"),
        ("dtype", "the observation arrives as float64, its space says float32"),
        ("unseeded", "diverge within 50 steps: reset(seed=) must seed"),
    ],
)
def test_each_problem_is_one_line_naming_it(flaw, message):
    report = _check(flaw)
    assert not report.ok
    assert any(message in line for line in report.problems), report.problems


def test_a_mask_of_the_wrong_size_is_a_problem():
    report = _check("mask")
    assert report.problems == [
        "episode 0: info['action_mask'] has 3 entries; the actions Discrete(2) need 2"
    ]


def test_an_unsupported_leaf_is_a_problem_with_its_remedy():
    report = check_env(EnvFactory("text", entry=TextLeafEnv))
    assert len(report.problems) == 1
    assert "'mission'" in report.problems[0]
    assert "env_options.drop_keys=mission" in report.problems[0]


def test_the_command_exits_1_with_problems_and_0_on_taxi(capsys):
    assert main(["check-env", "Taxi-v4", "--episodes", "1"]) == 0
    out = capsys.readouterr().out
    assert "action mask: from info['action_mask']" in out and "check-env: ok" in out
    assert main(["check-env", "Taxi-v4", "--set", "env_options.action_mask=none"]) == 0
    assert "action mask: none" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["check-env", "Taxi-v5"])
    assert "unknown env id 'Taxi-v5'" in capsys.readouterr().err
