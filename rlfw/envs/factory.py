"""Making environments by name, picklable so worker processes can build their own."""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import gymnasium as gym

from rlfw.envs.atari import AtariOptions, make_atari


def is_atari(env_id: str) -> bool:
    return env_id.startswith("ALE/")


def _registered_ids() -> list[str]:
    if any(is_atari(i) for i in gym.registry):
        return list(gym.registry)
    import ale_py

    gym.register_envs(ale_py)
    return list(gym.registry)


def check_env_id(env_id: str) -> None:
    """Raise ``ValueError`` naming the id and the closest registered ones if it is unknown."""
    ids = _registered_ids()
    if env_id in ids:
        return
    close = difflib.get_close_matches(env_id, ids, n=5)
    hint = f"; closest registered ids: {', '.join(close)}" if close else ""
    raise ValueError(
        f"unknown env id {env_id!r}: not registered with gymnasium{hint}. Atari games are "
        "'ALE/<Game>-v5' (e.g. 'ALE/Pong-v5'); other ids must be registered by importing "
        "their package first")


@dataclass(frozen=True)
class EnvFactory:
    """Builds one environment of ``env_id``; training and evaluation differ only for Atari
    (episodic life and reward clipping are training-only).

    Any gymnasium id works; ``ALE/...`` ids get the Nature preprocessing in ``atari``.
    ``kwargs`` go to ``gymnasium.make`` for non-Atari ids. A custom ``entry`` callable
    (picklable, e.g. a class) replaces ``gymnasium.make`` entirely, for test envs.
    """

    env_id: str
    atari: AtariOptions = field(default_factory=AtariOptions)
    kwargs: tuple[tuple[str, Any], ...] = ()
    entry: Any = None

    def __call__(self, train: bool = True) -> gym.Env:
        if is_atari(self.env_id) and self.entry is None:
            return make_atari(self.env_id, self.atari, train)
        make = self.entry if self.entry is not None else partial(gym.make, self.env_id)
        # Statistics wrapper outermost: for non-Atari tasks the episode *is* the game episode.
        return gym.wrappers.RecordEpisodeStatistics(make(**dict(self.kwargs)))

    def validate(self) -> None:
        if self.entry is None:
            check_env_id(self.env_id)


def make_env(env_id: str, train: bool = True, **kwargs: Any) -> gym.Env:
    """One env by gymnasium id with rlfw's standard wrappers (see ``EnvFactory``)."""
    factory = EnvFactory(env_id, kwargs=tuple(sorted(kwargs.items())))
    factory.validate()
    return factory(train)
