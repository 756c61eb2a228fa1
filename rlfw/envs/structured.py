"""Small tasks in the spaces beyond one Box and one Discrete, registered with gymnasium on
import of ``rlfw.envs``: CartPole re-dressed in a nested Dict/Tuple observation that must be
read leaf by leaf, SB3's identity tasks for MultiDiscrete and MultiBinary actions, and
sb3-contrib's identity task with invalid actions (the learning checks of those paths)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

CARTPOLE_DICT = "rlfw/CartPoleDict-v1"
IDENTITY_MULTI_DISCRETE = "rlfw/IdentityMultiDiscrete-v0"
IDENTITY_MULTI_BINARY = "rlfw/IdentityMultiBinary-v0"
INVALID_ACTION_IDENTITY = "rlfw/InvalidActionIdentity-v0"


class CartPoleAsDict(gym.ObservationWrapper):
    """CartPole-v1 observing ``{"cart": [x, x_dot], "pole": (angle bucket, [theta,
    theta_dot])}``: a Dict holding a Box and a Tuple of a ``Discrete(8)`` (the pole angle's
    bucket among 8 over ±12°) and a Box. No leaf alone tells the whole state."""

    BUCKETS = 8
    LIMIT = 12 * 2 * np.pi / 360  # CartPole's failure angle

    def __init__(self, env: gym.Env):
        super().__init__(env)
        box = env.observation_space
        assert isinstance(box, gym.spaces.Box)
        self.observation_space = gym.spaces.Dict(
            {
                "cart": gym.spaces.Box(box.low[:2], box.high[:2], (2,), np.float32),
                "pole": gym.spaces.Tuple(
                    (
                        gym.spaces.Discrete(self.BUCKETS),
                        gym.spaces.Box(box.low[2:], box.high[2:], (2,), np.float32),
                    )
                ),
            }
        )

    def observation(self, observation: np.ndarray) -> dict[str, Any]:
        theta = float(observation[2])
        bucket = int((theta + self.LIMIT) / (2 * self.LIMIT) * self.BUCKETS)
        return {
            "cart": observation[:2].astype(np.float32),
            "pole": (
                np.int64(min(max(bucket, 0), self.BUCKETS - 1)),
                observation[2:].astype(np.float32),
            ),
        }


def cartpole_dict(**kwargs: Any) -> gym.Env:
    """CartPole-v1 behind ``CartPoleAsDict``."""
    return CartPoleAsDict(gym.make("CartPole-v1", **kwargs))


class IdentityEnv(gym.Env):
    """SB3's identity tasks for any ``space`` (``MultiDiscrete``, ``MultiBinary``,
    ``Discrete``): observe a random element of ``space``, act with one; the reward is the
    fraction of entries the action matches. Episodes last ``length`` steps, so a perfect
    policy scores ``length`` and a uniformly random one much less."""

    metadata: dict[str, Any] = {}

    def __init__(self, space: gym.Space[Any] | None = None, length: int = 20):
        space = gym.spaces.MultiDiscrete([3, 4]) if space is None else space
        self.observation_space = space
        self.action_space = space
        self.length = length
        self._target: Any = None
        self._t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self._t = 0
        self._target = self.observation_space.sample()
        return self._target, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        matched = np.asarray(action) == np.asarray(self._target)
        reward = float(matched.mean())
        self._t += 1
        self._target = self.observation_space.sample()
        return self._target, reward, False, self._t >= self.length, {}


def multi_discrete_identity_env(**kwargs: Any) -> gym.Env:
    """``IdentityEnv`` over ``MultiDiscrete([3, 4])`` (SB3's ``IdentityEnvMultiDiscrete``)."""
    return IdentityEnv(gym.spaces.MultiDiscrete([3, 4]), **kwargs)


def multi_binary_identity_env(**kwargs: Any) -> gym.Env:
    """``IdentityEnv`` over ``MultiBinary(4)`` (SB3's ``IdentityEnvMultiBinary``)."""
    return IdentityEnv(gym.spaces.MultiBinary(4), **kwargs)


class InvalidActionIdentity(gym.Env):
    """sb3-contrib's ``InvalidActionEnvDiscrete``: observe a target among ``n`` actions and
    a mask (observation key ``action_mask``) on which ``n_invalid`` other actions are
    invalid; reward 1 for the target, 0 otherwise, 100 steps an episode. A masked policy
    chooses among ``n - n_invalid`` actions from the start."""

    metadata: dict[str, Any] = {}

    def __init__(self, n: int = 20, n_invalid: int = 10, length: int = 100):
        self.n, self.n_invalid, self.length = n, n_invalid, length
        self.observation_space = gym.spaces.Dict(
            {"target": gym.spaces.Discrete(n), "action_mask": gym.spaces.MultiBinary(n)}
        )
        self.action_space = gym.spaces.Discrete(n)
        self._target, self._t = 0, 0

    def _obs(self) -> dict[str, Any]:
        self._target = int(self.np_random.integers(self.n))
        others = np.delete(np.arange(self.n), self._target)
        invalid = self.np_random.choice(others, self.n_invalid, replace=False)
        mask = np.ones(self.n, np.int8)
        mask[invalid] = 0
        return {"target": np.int64(self._target), "action_mask": mask}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        reward = float(int(action) == self._target)
        self._t += 1
        return self._obs(), reward, False, self._t >= self.length, {}


def register_structured_envs() -> None:
    """Register the ids above with gymnasium (idempotent: worker processes import too)."""
    if CARTPOLE_DICT not in gym.registry:
        gym.register(CARTPOLE_DICT, entry_point=cartpole_dict)
        gym.register(IDENTITY_MULTI_DISCRETE, entry_point=multi_discrete_identity_env)
        gym.register(IDENTITY_MULTI_BINARY, entry_point=multi_binary_identity_env)
        gym.register(
            INVALID_ACTION_IDENTITY, entry_point="rlfw.envs.structured:InvalidActionIdentity"
        )
