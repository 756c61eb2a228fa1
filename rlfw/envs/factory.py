"""Making environments by name, picklable so worker processes can build their own."""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import sys
import warnings
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Annotated, Any, cast

import gymnasium as gym
import numpy as np

from rlfw.envs.atari import AtariOptions, make_atari
from rlfw.envs.masks import MASK_MODES, resolve_mask_mode, with_action_mask
from rlfw.envs.minigrid import TileCodes, is_minigrid, register_minigrid_envs
from rlfw.envs.multiagent import (
    ColumnsEnv,
    check_pettingzoo_module,
    is_pettingzoo,
    make_pettingzoo,
)
from rlfw.envs.robotics import is_robotics, register_robotics_envs
from rlfw.utils.settings import Flag


def is_atari(env_id: str) -> bool:
    return env_id.startswith("ALE/")


def _registered_ids(env_id: str = "") -> list[str]:
    if is_minigrid(env_id):
        register_minigrid_envs()
    if is_robotics(env_id):
        register_robotics_envs()
    if any(is_atari(i) for i in gym.registry):
        return list(gym.registry)
    import ale_py

    gym.register_envs(ale_py)
    return list(gym.registry)


def env_module(env_id: str) -> str | None:
    """The module gymnasium imports to make ``env_id`` ('module:Env-v0'), or None."""
    module, sep, _ = env_id.partition(":")
    return module if sep else None


def check_env_id(env_id: str) -> None:
    """Raise ``ValueError`` naming the id and the closest registered ones if it is unknown.
    A 'module:Env' id passes only once ``module`` was imported by the user (a script's
    import, the CLI's ``--plugin``): gymnasium would import it, and an id read from a file
    must not decide what code runs."""
    module = env_module(env_id)
    if module is not None:
        if module not in sys.modules:
            raise ValueError(
                f"env id {env_id!r} would import module {module!r} (gymnasium imports what "
                f"precedes ':'); rlfw does not import a module an env id names: import it "
                f"first (in a script) or name it on the command line (--plugin {module})"
            )
        env_id = env_id.partition(":")[2]
    ids = _registered_ids(env_id)
    if env_id in ids:
        return
    close = difflib.get_close_matches(env_id, ids, n=5)
    hint = f"; closest registered ids: {', '.join(close)}" if close else ""
    raise ValueError(
        f"unknown env id {env_id!r}: not registered with gymnasium{hint}. Atari games are "
        "'ALE/<Game>-v5' (e.g. 'ALE/Pong-v5'); other ids must be registered by importing "
        "their package first"
    )


def is_mujoco(env_id: str) -> bool:
    """One of gymnasium's MuJoCo envs (HalfCheetah-v5, Hopper-v5, ...)."""
    spec = gym.registry.get(env_id)
    entry = getattr(spec, "entry_point", "") if spec is not None else ""
    return isinstance(entry, str) and entry.startswith("gymnasium.envs.mujoco")


def is_box2d(env_id: str) -> bool:
    """One of gymnasium's Box2D envs (LunarLander-v3, BipedalWalker-v3, CarRacing-v3)."""
    spec = gym.registry.get(env_id)
    entry = getattr(spec, "entry_point", "") if spec is not None else ""
    return isinstance(entry, str) and entry.startswith("gymnasium.envs.box2d")


def check_env_available(env_id: str) -> None:
    """Raise ``ValueError`` naming the extra to install when ``env_id`` needs a package
    that is missing."""
    if env_id.startswith("MinAtar/") and importlib.util.find_spec("minatar") is None:
        raise ValueError(
            f"env {env_id!r} is a MinAtar game and needs the minatar package, "
            "which is not installed: pip install -e '.[minatar]'"
        )
    if is_minigrid(env_id) and importlib.util.find_spec("minigrid") is None:
        raise ValueError(
            f"env {env_id!r} is a MiniGrid env and needs the minigrid package, which is "
            "not installed: pip install -e '.[minigrid]'"
        )
    if is_box2d(env_id) and importlib.util.find_spec("Box2D") is None:
        raise ValueError(
            f"env {env_id!r} is one of gymnasium's Box2D envs and needs Box2D, which is not "
            "installed: pip install -e '.[box2d]' (the extra installs gymnasium[box2d])"
        )
    if is_mujoco(env_id) and importlib.util.find_spec("mujoco") is None:
        raise ValueError(
            f"env {env_id!r} is one of gymnasium's MuJoCo envs and needs MuJoCo, "
            "which is not installed: pip install -e '.[mujoco]' (the extra "
            "installs gymnasium[mujoco])"
        )


class Float32Observation(gym.ObservationWrapper):
    """float64 Box observations (MuJoCo's) as float32, the models' dtype (as SB3 does).
    A class, not gymnasium's lambda-based wrapper: envs are pickled into checkpoints."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = cast(gym.spaces.Box, env.observation_space)  # see ``_float32_observations``
        self.observation_space = gym.spaces.Box(
            space.low.astype(np.float32), space.high.astype(np.float32), space.shape, np.float32
        )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation.astype(np.float32)


def _float32_observations(env: gym.Env) -> gym.Env:
    space = env.observation_space
    if isinstance(space, gym.spaces.Box) and space.dtype == np.float64:
        return Float32Observation(env)
    return env


class MujocoWarning(UserWarning):
    """A warning from the MuJoCo engine (e.g. a deprecated attribute in a model file)."""


def _mujoco_warning(message: str) -> None:
    # Python's default filter shows a given warning once per place: a run that makes many
    # envs prints MuJoCo's model-compiler notice once, not once per env.
    warnings.warn(message.strip(), MujocoWarning, stacklevel=2)


def route_mujoco_warnings() -> None:
    """Send MuJoCo's warnings to Python's ``warnings`` (shown once) instead of its default
    handler, which prints each one and appends it to ``MUJOCO_LOG.TXT`` in the working
    folder. MuJoCo's handler is process-wide; this sets it once per process."""
    import mujoco

    if mujoco.get_mju_user_warning() is not _mujoco_warning:
        mujoco.set_mju_user_warning(_mujoco_warning)


@dataclass(frozen=True)
class EnvOptions:
    """How any env's observations are shaped before rlfw sees them."""

    drop_keys: tuple[str, ...] = ()
    """Top-level keys of a Dict observation to drop (e.g. MiniGrid's text 'mission', which
    has no fixed shape for the buffer)."""
    action_mask: str = "auto"
    """Where the invalid-action mask comes from: 'auto' (info['action_mask'], else an
    observation key 'action_mask'), 'info', 'none' (no masking), or an observation key.
    Agents act, learn and bootstrap over the valid actions only."""
    kwargs: Annotated[tuple[str, ...], Flag("--env-kwargs", nargs="+", metavar="KEY=VALUE")] = ()
    """Arguments of the env's constructor (gymnasium.make's, a PettingZoo module's
    parallel_env()) as KEY=VALUE texts, each value a Python literal (50, 0.5, True,
    'text') or else the text itself: --env-kwargs max_cycles=50 N=4."""
    global_state: bool = False
    """Many-agent envs: each agent observes a Dict of its own observation
    ('observation'), the env's ``state()`` ('state') and its one-hot index ('agent'), the
    input of a centralized critic (MAPPO's)."""

    def constructor_kwargs(self) -> dict[str, Any]:
        """``kwargs`` as a dict: ``ValueError`` naming an item that is not KEY=VALUE."""
        out: dict[str, Any] = {}
        for item in self.kwargs:
            key, sep, text = str(item).partition("=")
            if not sep or not key.isidentifier():
                raise ValueError(
                    f"env_options.kwargs item {item!r} is not KEY=VALUE with KEY a Python "
                    "name (e.g. max_cycles=50)"
                )
            try:
                out[key] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                out[key] = text
        return out

    def validate(self) -> None:
        """``ValueError`` naming a bad option."""
        self.constructor_kwargs()
        if not isinstance(self.action_mask, str) or not self.action_mask:
            raise ValueError(
                f"env_options.action_mask must be one of {list(MASK_MODES)} or an "
                f"observation key, got {self.action_mask!r}"
            )


class DropObservationKeys(gym.ObservationWrapper):
    """A Dict observation without the keys ``drop`` (gymnasium's ``FilterObservation``
    keeps keys; this says which go, and names the keys there are when one is not)."""

    def __init__(self, env: gym.Env, drop: tuple[str, ...]):
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Dict):
            raise ValueError(
                f"env_options.drop_keys={list(drop)} drops keys of a Dict observation; this "
                f"env observes {space}"
            )
        missing = sorted(set(drop) - set(space.spaces))
        if missing:
            raise ValueError(
                f"env_options.drop_keys names {missing}, which the observation does not have; "
                f"its keys are {sorted(space.spaces)}"
            )
        self.keep = [key for key in space.spaces if key not in drop]
        if not self.keep:
            raise ValueError(f"env_options.drop_keys={list(drop)} would drop every key")
        self.observation_space = gym.spaces.Dict({key: space[key] for key in self.keep})

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        return {key: observation[key] for key in self.keep}


@dataclass(frozen=True)
class EnvFactory:
    """Builds one environment of ``env_id``; training and evaluation differ only for Atari
    (episodic life and reward clipping are training-only).

    Any gymnasium id works; ``ALE/...`` ids get the Nature preprocessing in ``atari``.
    ``kwargs`` go to ``gymnasium.make`` for non-Atari ids. A custom ``entry`` callable
    (picklable, e.g. a class) replaces ``gymnasium.make`` entirely, for test envs.

    ``plugins`` are the modules the run imported first (``--plugin``): what registered the
    user's env id. The factory travels to every process that makes envs (sampler workers,
    the async sampler process, evaluation workers), and each imports them before its first
    env, so an id a plugin registered resolves everywhere it resolves in the main process.
    """

    env_id: str
    atari: AtariOptions = field(default_factory=AtariOptions)
    kwargs: tuple[tuple[str, Any], ...] = ()
    entry: Any = None
    render_mode: str | None = None  # 'rgb_array' for videos
    options: EnvOptions = field(default_factory=EnvOptions)
    plugins: tuple[str, ...] = ()

    def __call__(self, train: bool = True) -> gym.Env:
        for module in self.plugins:  # a no-op where imported (sys.modules): the main process
            importlib.import_module(module)
        if is_atari(self.env_id) and self.entry is None:
            return make_atari(self.env_id, self.atari, train, self.render_mode)
        if self.entry is None and is_pettingzoo(self.env_id):  # its agents are columns
            kwargs = {**dict(self.kwargs), **self.options.constructor_kwargs()}
            return make_pettingzoo(self.env_id, self.options.global_state, **kwargs)
        if self.entry is None and is_mujoco(self.env_id):
            route_mujoco_warnings()
        minigrid = self.entry is None and is_minigrid(self.env_id)
        if minigrid:
            register_minigrid_envs()  # in every process: workers make their own envs
        if self.entry is None and is_robotics(self.env_id):
            register_robotics_envs()
        make = self.entry if self.entry is not None else partial(gym.make, self.env_id)
        kwargs = {**dict(self.kwargs), **self.options.constructor_kwargs()}
        if self.render_mode is not None:
            kwargs["render_mode"] = self.render_mode
        try:
            env = make(**kwargs)
        except (ImportError, gym.error.DependencyNotInstalled) as err:
            # ids gymnasium keeps only to say where they went (Hopper-v3: mujoco-py) and
            # envs whose package is missing: one line naming it, not a traceback
            raise ValueError(f"env {self.env_id!r} cannot be made here: {err}") from None
        if isinstance(env, ColumnsEnv):  # many agents: it keeps its own episode statistics
            return env
        if minigrid:
            env = TileCodes(env)
        if self.options.drop_keys:
            env = DropObservationKeys(env, tuple(self.options.drop_keys))
        env = with_action_mask(env, self.options.action_mask)
        # Statistics wrapper outermost: for non-Atari tasks the episode *is* the game episode.
        return gym.wrappers.RecordEpisodeStatistics(_float32_observations(env))

    def resolved(self) -> "EnvFactory":
        """This factory with ``options.action_mask='auto'`` made concrete by one probe env
        (a mask in ``info`` becomes 'info'), so every env it builds agrees without each
        resetting a probe of its own."""
        if (
            self.options.action_mask != "auto"
            or is_atari(self.env_id)
            or is_pettingzoo(self.env_id)
        ):
            return self
        probe = self(True)
        try:
            mode = resolve_mask_mode(probe, "auto")
        finally:
            probe.close()
        if mode == "auto":
            return self
        return replace(self, options=replace(self.options, action_mask=mode))

    def validate(self) -> None:
        """``ValueError`` naming a bad option, an unknown id, a missing extra, or a plugin
        the main process has not imported (the factory imports its plugins in workers only
        because the user's command line or script imported them here first)."""
        not_imported = [m for m in self.plugins if m not in sys.modules]
        if not_imported:
            raise ValueError(
                f"plugins {not_imported} are not imported in this process; rlfw imports "
                "a run's plugins in its workers only after the user imported them (a "
                "script's import, --plugin on the command line)"
            )
        self.options.validate()
        if is_atari(self.env_id):
            self.atari.validate()
        if self.entry is None and is_pettingzoo(self.env_id):
            check_pettingzoo_module(self.env_id)
        elif self.entry is None:
            check_env_available(self.env_id)
            check_env_id(self.env_id)


def make_env(env_id: str, train: bool = True, **kwargs: Any) -> gym.Env:
    """One env by gymnasium id with rlfw's standard wrappers (see ``EnvFactory``)."""
    factory = EnvFactory(env_id, kwargs=tuple(sorted(kwargs.items())))
    factory.validate()
    return factory(train)
