"""Many-agent envs as columns of the batch: each (env, agent) pair is one column, so every
sampler, runner and algorithm that works on columns works on agents (PufferLib's layout).

``ColumnsEnv`` is the interface the samplers' env groups step (``rlfw.samplers.machinery.
env_group``): one env that fills ``columns`` consecutive slots. ``ParallelColumns`` adapts a
PettingZoo Parallel env to it; ``pettingzoo_factory`` makes one from a module name such as
``mpe2.simple_spread_v3`` (rlfw calls its ``parallel_env()``).
"""

from __future__ import annotations

import importlib
import io
import pickle
import sys
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.utils.ezpickle import EzPickle

# Packages whose env modules a run may name without --plugin: they are PettingZoo's own
# families and MPE's, installed by the [pettingzoo] extra; any other module is code the
# command line must name (the rule for 'module:Env' gymnasium ids).
PETTINGZOO_FAMILIES = ("pettingzoo.", "mpe2.")


def is_pettingzoo(env_id: str) -> bool:
    """``env_id`` names a PettingZoo env module (``mpe2.simple_spread_v3``), not a
    gymnasium id: a dotted module path, with no version suffix or namespace slash, that
    gymnasium has not registered."""
    return (
        "." in env_id
        and not any(mark in env_id for mark in ("/", ":", "-v"))
        and env_id not in gym.registry
    )


def check_pettingzoo_module(env_id: str) -> None:
    """``ValueError`` when ``env_id``'s module cannot be used: outside the known families
    and not imported by the user (``--plugin``), not installed, or without ``parallel_env``."""
    if not env_id.startswith(PETTINGZOO_FAMILIES) and env_id not in sys.modules:
        raise ValueError(
            f"env {env_id!r} is a module outside the PettingZoo families rlfw imports "
            f"({', '.join(p.rstrip('.') for p in PETTINGZOO_FAMILIES)}); name it on the "
            f"command line to import it: --plugin {env_id}"
        )
    try:
        module = importlib.import_module(env_id)
    except ModuleNotFoundError as e:
        extra = "pip install -e '.[pettingzoo]'" if env_id.startswith(PETTINGZOO_FAMILIES) else ""
        raise ValueError(
            f"env {env_id!r}: module {e.name!r} is not installed{'; ' + extra if extra else ''}"
        ) from None
    if not callable(getattr(module, "parallel_env", None)):
        raise ValueError(
            f"env {env_id!r}: the module has no parallel_env(); rlfw runs PettingZoo envs "
            "through their Parallel API"
        )


class ColumnsEnv(gym.Env):
    """One env that fills ``columns`` consecutive columns of the batch, one per agent.

    ``observation_space`` and ``action_space`` are one column's. ``reset`` returns the
    columns' observations (a list) and an info dict; ``step(actions)`` takes one action
    per column and returns (observations, rewards ``[columns]``, terminated ``[columns]``,
    truncated ``[columns]``, info). A column whose agent has left while others play on
    reports its end once, then zero observations and rewards with ``terminated`` set until
    the env's episode ends; ``info["episode"]`` (``r``: the team return, the agents'
    rewards summed over the episode as EPyMARL reports it; ``l``: steps) comes with the
    step that ends the episode for every agent, after which the caller resets the env.
    """

    columns: int = 1

    @property
    def present(self) -> np.ndarray:
        """``[columns]``: whether each column's agent is in the env now (its next action
        counts); an agent that left is absent until the env resets."""
        return np.ones(self.columns, bool)


class ParallelColumns(ColumnsEnv):
    """A PettingZoo Parallel env as columns, in ``possible_agents`` order; every agent
    must have the same observation and action spaces (agents of different spaces need
    groups, each its own policy)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, make: Callable[[], Any], name: str = "env", global_state: bool = False):
        self.env = make()
        self.agents: list[str] = list(self.env.possible_agents)
        spaces = {
            (str(self.env.observation_space(a)), str(self.env.action_space(a))) for a in self.agents
        }
        if len(spaces) > 1:
            detail = "; ".join(
                f"{a}: {self.env.observation_space(a)} -> {self.env.action_space(a)}"
                for a in self.agents
            )
            raise ValueError(
                f"{name}'s agents have different spaces ({detail}); rlfw shares one policy "
                "across columns of one space, and groups of agents are not supported yet"
            )
        self.columns = len(self.agents)
        self.observation_space = self.env.observation_space(self.agents[0])
        self.action_space = self.env.action_space(self.agents[0])
        self._zero_obs = _zeros(self.observation_space)
        self.global_state = global_state
        if global_state:
            self.observation_space = self._with_state_space(name)
        self._ids = np.eye(self.columns, dtype=np.float32)
        self._present = np.zeros(self.columns, bool)
        self._team_return, self._length = 0.0, 0

    @property
    def present(self) -> np.ndarray:
        present: np.ndarray = self._present.copy()
        return present

    def state(self) -> np.ndarray:
        """The env's global state (a centralized critic's input)."""
        return np.asarray(self.env.state())

    def _with_state_space(self, name: str) -> gym.spaces.Dict:
        """The Dict space of an agent's observation beside the env's state and its id."""
        if not callable(getattr(self.env, "state", None)):
            raise ValueError(
                f"env_options.global_state needs {name}'s state(), which it does not have"
            )
        space = getattr(self.env, "state_space", None)
        if not isinstance(space, gym.spaces.Box):
            shape = np.asarray(self.env.state()).shape
            space = gym.spaces.Box(-np.inf, np.inf, shape, np.float32)
        agent = gym.spaces.Box(0.0, 1.0, (self.columns,), np.float32)
        own = self.observation_space
        return gym.spaces.Dict({"observation": own, "state": space, "agent": agent})

    def _rows(self, observations: dict[str, Any]) -> list[Any]:
        rows = [observations.get(a, self._zero_obs) for a in self.agents]
        if not self.global_state:
            return rows
        state = np.asarray(self.env.state(), np.float32)
        return [
            {"observation": row, "state": state, "agent": self._ids[i]}
            for i, row in enumerate(rows)
        ]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Any], dict[str, Any]]:
        super().reset(seed=seed)
        observations, _ = self.env.reset(seed=seed, options=options)
        self._present = np.array([a in observations for a in self.agents])
        self._team_return, self._length = 0.0, 0
        return self._rows(observations), {}

    def step(  # type: ignore[override]  # one action, reward and end per column
        self, action: Sequence[Any]
    ) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        live = {a: _action(action[i]) for i, a in enumerate(self.agents) if self._present[i]}
        observations, rewards, terminations, truncations, _ = self.env.step(live)
        reward = np.array([float(rewards.get(a, 0.0)) for a in self.agents], np.float32)
        was_present = self._present
        terminated = np.array([bool(terminations.get(a, False)) for a in self.agents])
        truncated = np.array([bool(truncations.get(a, False)) for a in self.agents])
        ended = terminated | truncated
        self._present = was_present & ~ended
        terminated |= ~was_present  # an absent column stays ended until the env resets
        self._team_return += float(reward.sum())
        self._length += 1
        info: dict[str, Any] = {}
        if not self._present.any():
            info["episode"] = {"r": self._team_return, "l": self._length}
        return self._rows(observations), reward, terminated, truncated & ~terminated, info

    def close(self) -> None:
        self.env.close()

    # A checkpoint holds the env mid-episode. PettingZoo's envs (MPE's included) pickle
    # through EzPickle, which keeps the constructor's arguments and unpickles a fresh env:
    # a resumed run would go on from unreset envs. Their attributes are pickled instead.
    def __getstate__(self) -> dict[str, Any]:
        blob = io.BytesIO()
        _AttributePickler(blob).dump(self.env)
        return {**vars(self), "env": blob.getvalue()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self.env = pickle.loads(state["env"])


class _AttributePickler(pickle.Pickler):
    """Pickles EzPickle objects by their attributes, not their constructor's arguments;
    pygame objects (MPE's drawing surface, made whether or not it renders) as None: they
    hold nothing of the episode, and pygame cannot pickle them."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj).__module__.startswith("pygame"):
            return _none, ()
        if isinstance(obj, EzPickle):
            return _bare, (type(obj),), vars(obj), None, None, _set_attributes
        return NotImplemented


def _none() -> None:
    return None


def _bare(cls: type[Any]) -> Any:
    return object.__new__(cls)


def _set_attributes(obj: Any, attributes: dict[str, Any]) -> None:
    vars(obj).update(attributes)


def _action(a: Any) -> Any:
    """A buffer action as PettingZoo takes it: a Python int for a discrete one."""
    array = np.asarray(a)
    return int(array) if array.ndim == 0 and array.dtype.kind in "iu" else array


def _zeros(space: gym.Space[Any]) -> Any:
    """An all-zero observation of ``space`` (an absent agent's row)."""
    if isinstance(space, gym.spaces.Dict):
        return {k: _zeros(s) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_zeros(s) for s in space.spaces)
    return np.zeros(space.shape, space.dtype)


def _parallel_env(env_id: str, **kwargs: Any) -> Any:
    return importlib.import_module(env_id).parallel_env(**kwargs)


def make_pettingzoo(env_id: str, global_state: bool = False, **kwargs: Any) -> ParallelColumns:
    """The PettingZoo env module ``env_id``'s ``parallel_env(**kwargs)`` as columns
    (``global_state``: each agent's observation beside the env's state)."""
    return ParallelColumns(lambda: _parallel_env(env_id, **kwargs), env_id, global_state)


def columns_of(env: gym.Env) -> int:
    """How many columns of the batch one env fills (its agents; 1 for a gymnasium env)."""
    return env.columns if isinstance(env, ColumnsEnv) else 1


def factory_columns(env_factory: Callable[..., gym.Env]) -> int:
    """``columns_of`` an env ``env_factory`` makes; a gymnasium id's factory answers 1
    without making one (a probe of an Atari game costs a ROM load)."""
    env_id, entry = getattr(env_factory, "env_id", None), getattr(env_factory, "entry", 0)
    if isinstance(env_id, str) and entry is None and not is_pettingzoo(env_id):
        return 1
    try:
        probe = env_factory(True)
    except Exception:  # the workers that make it report the failure, traceback and all
        return 1
    try:
        return columns_of(probe)
    finally:
        probe.close()
