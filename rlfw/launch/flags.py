"""The train command's config flags, made from the config fields that declare one
(``Annotated[..., Flag("--lr")]``, ``rlfw.utils.settings``): their names, help, typing and
the key each sets come from the field, so a new flag is one declaration.

A flag on an algorithm's field (``--lr`` on ``PPOConfig.learning_rate``) sets that field of
whichever algorithm the run trains; an algorithm without the field refuses it by name.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from rlfw.launch.config import RunConfig, convert
from rlfw.registry import ALGOS
from rlfw.utils.settings import Flag, Setting, settings_of

# The default of every config flag: None is a value some flags set (--compile auto).
UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET"})()

# Prefix of a key that a flag leaves to the run's algorithm ("<algo>.learning_rate" is
# "ppo.learning_rate" in a PPO run); not a key anyone can type.
ALGO_FIELD = "<algo>."


@dataclass(frozen=True)
class ConfigFlag:
    """One flag of ``rlfw train``: the config key it sets and the field declaring it."""

    flag: Flag
    key: str  # dotted key, or ALGO_FIELD + field
    setting: Setting
    algos: tuple[str, ...] = ()  # for ALGO_FIELD keys: the algorithms that have the field

    @property
    def dest(self) -> str:
        return dest_of(self.key)

    @property
    def shown(self) -> str:
        """The flag as the user typed it, for messages."""
        return self.flag.names[0]


def dest_of(key: str) -> str:
    """The argparse attribute holding a config flag's value for ``key``."""
    return "cfg_" + key.replace(ALGO_FIELD, "algo__").replace(".", "__")


def config_flags() -> list[ConfigFlag]:
    """Every flag declared on a config field: the run's own fields, its groups (schedule,
    atari, wandb) and every registered algorithm's config, in declaration order."""
    out: list[ConfigFlag] = []
    for setting in settings_of(RunConfig):
        if setting.name in ALGOS:
            continue  # the algorithms' groups: below, once for all of them
        group = setting.default
        if dataclasses.is_dataclass(group):
            out += [
                ConfigFlag(flag, f"{setting.name}.{inner.name}", inner)
                for inner in settings_of(type(group))
                for flag in inner.flags
            ]
        else:
            out += [ConfigFlag(flag, setting.name, setting) for flag in setting.flags]
    by_name: dict[str, ConfigFlag] = {}
    for spec in ALGOS:
        for setting in settings_of(spec.config_cls):
            for flag in setting.flags:
                seen = by_name.get(flag.names[0])
                if seen is not None and seen.setting.name != setting.name:
                    raise ValueError(
                        f"flag {flag.names[0]} sets {seen.setting.name} in one "
                        f"algorithm and {setting.name} in {spec.name}"
                    )
                algos = (seen.algos if seen else ()) + (spec.name,)
                by_name[flag.names[0]] = ConfigFlag(
                    flag,
                    ALGO_FIELD + setting.name,
                    setting if seen is None else seen.setting,
                    algos,
                )
    return out + list(by_name.values())


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """Add every config flag to ``parser``; the flags setting one field with constants
    (``--eval-greedy`` / ``--eval-sampled``) exclude each other."""
    flags = config_flags()
    groups: dict[str, Any] = {}
    for spec in flags:
        siblings = [f for f in flags if f.key == spec.key]
        target: Any = parser
        if len(siblings) > 1:
            if spec.key not in groups:
                groups[spec.key] = parser.add_mutually_exclusive_group()
            target = groups[spec.key]
        kwargs: dict[str, Any] = {"dest": spec.dest, "help": _help(spec), "default": UNSET}
        if spec.flag.takes_value:
            kwargs["type"] = _parser_of(spec)
            choices = spec.flag.choices
            kwargs["metavar"] = spec.flag.metavar or (
                "{" + ",".join(choices) + "}"
                if isinstance(choices, Mapping)
                else spec.setting.name.upper()
            )
        else:
            kwargs.update(action="store_const", const=spec.flag.const)
        target.add_argument(*spec.flag.names, **kwargs)


def given_flags(args: argparse.Namespace) -> list[tuple[str, str, Any]]:
    """``(flag as typed, config key, value)`` of every config flag the user set, in
    declaration order (an algorithm's field keyed ``ALGO_FIELD + field``)."""
    flags = config_flags()
    seen, out = set(), []
    for spec in flags:
        value = getattr(args, spec.dest, UNSET)
        if value is UNSET or spec.dest in seen:
            continue
        seen.add(spec.dest)
        # of a field's constant flags (--eval-greedy, --eval-sampled), the one that was typed
        shown = next(
            (f.shown for f in flags if f.dest == spec.dest and f.flag.const == value),
            spec.shown,
        )
        out.append((shown, spec.key, value))
    return out


def _help(spec: ConfigFlag) -> str:
    text = (spec.flag.help or spec.setting.help).replace("%", "%%")
    choices = spec.flag.choices
    if callable(choices) and not isinstance(choices, Mapping):
        text += f" One of: {', '.join(choices())}."
    if spec.key.startswith(ALGO_FIELD):
        field = spec.key.removeprefix(ALGO_FIELD)
        return f"{', '.join(spec.algos)}: {text} [<algo>.{field}]"
    return f"{text} [{spec.key}]"


def _parser_of(spec: ConfigFlag) -> Callable[[str], Any]:
    """The text of a flag as its field's value: a choice's value, or the field's type."""
    choices = spec.flag.choices

    def parse(text: str) -> Any:
        if isinstance(choices, Mapping):
            if text not in choices:
                raise argparse.ArgumentTypeError(f"takes one of {', '.join(choices)}, got {text!r}")
            return choices[text]
        try:
            return convert(spec.key, text, spec.setting.type)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = spec.setting.name  # argparse names the type in its own messages
    return parse
