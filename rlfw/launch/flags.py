"""Command-line flags made from declared fields (``Annotated[..., Flag("--lr")]``,
``rlfw.utils.settings``): their names, help, typing and defaults come from the field, so a
new flag is one declaration and no command writes parser code for a setting.

Two kinds. *Config flags* set a key of the run's ``RunConfig`` (``--batch-B`` sets
``batch_B``); every command that takes one (``train``, ``bench-sampler``, ``benchmark``)
gets it from the same declaration, so its name and help are the same everywhere. A flag on
an algorithm's field (``--lr`` on ``PPOConfig.learning_rate``) sets that field of whichever
algorithm the run trains; an algorithm without the field refuses it by name. *Command
options* are a command's own settings (``rlfw eval --episodes``), declared as fields of
the option dataclasses in ``rlfw.launch.commands``.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Callable, Collection, Mapping

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


def add_config_flags(parser: argparse.ArgumentParser, keys: Collection[str] = ()) -> None:
    """Add the config flags to ``parser`` (only those of ``keys``, when given); each
    defaults to ``UNSET``, so a command can tell what the user set."""
    flags = [f for f in config_flags() if not keys or f.key in keys]
    missing = set(keys) - {f.key for f in flags}
    if missing:
        raise ValueError(f"no config flag is declared for {sorted(missing)}")
    _add_flags(parser, [(f.flag, f.setting, f.dest, UNSET, _help(f), f.key) for f in flags])


def add_options(parser: argparse.ArgumentParser, options: type, only: Collection[str] = ()) -> None:
    """Add a command's own options: a flag per field of dataclass ``options`` (only the
    fields named in ``only``, when given), defaulting to the field's default (a field
    without one is a required flag), stored under the field's name."""
    settings = [s for s in settings_of(options) if not only or s.name in only]
    for setting in settings:
        if not setting.flags:
            raise ValueError(f"{options.__name__}.{setting.name} declares no Flag")
    _add_flags(
        parser,
        [
            (flag, setting, setting.name, setting.default, _option_help(flag, setting), "")
            for setting in settings
            for flag in setting.flags
        ],
    )


def _add_flags(
    parser: argparse.ArgumentParser, flags: list[tuple[Flag, Setting, str, Any, str, str]]
) -> None:
    """Add each ``(flag, setting, dest, default, help, config key or '')``; the constant
    flags of one field (``--eval-greedy`` / ``--eval-sampled``) exclude each other."""
    groups: dict[str, Any] = {}
    for flag, setting, dest, default, text, key in flags:
        target: Any = parser
        if sum(entry[2] == dest for entry in flags) > 1:
            if dest not in groups:
                groups[dest] = parser.add_mutually_exclusive_group()
            target = groups[dest]
        kwargs: dict[str, Any] = {"dest": dest, "help": text}
        if default is dataclasses.MISSING:
            kwargs["required"] = True
        else:
            kwargs["default"] = list(default) if isinstance(default, tuple) else default
        if not flag.takes_value:
            kwargs.update(action="store_const", const=flag.const)
        else:
            many = typing.get_origin(_without_none(setting.type)) is tuple
            kwargs["type"] = _parser_of(flag, setting, key, many)
            if many:
                kwargs.update({"nargs": flag.nargs} if flag.nargs else {"action": "append"})
            choices = flag.choices
            kwargs["metavar"] = flag.metavar or (
                "{" + ",".join(choices) + "}"
                if isinstance(choices, Mapping)
                else setting.name.upper()
            )
        target.add_argument(*flag.names, **kwargs)


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


def given_value(args: argparse.Namespace, key: str) -> Any:
    """The value the user gave config flag ``key`` (``algo``, ``schedule.n_steps``), or
    None when they gave none."""
    value = getattr(args, dest_of(key), UNSET)
    return None if value is UNSET else value


def _help(spec: ConfigFlag) -> str:
    text = _with_choices(spec.flag, spec.flag.help or spec.setting.help)
    if spec.key.startswith(ALGO_FIELD):
        field = spec.key.removeprefix(ALGO_FIELD)
        return f"{', '.join(spec.algos)}: {text} [<algo>.{field}]"
    return f"{text} [{spec.key}]"


def _option_help(flag: Flag, setting: Setting) -> str:
    text = _with_choices(flag, flag.help or setting.help)
    shown = setting.default
    if shown is dataclasses.MISSING or not flag.takes_value or shown in (None, (), ""):
        return text
    shown = " ".join(map(str, shown)) if isinstance(shown, tuple) else shown
    return f"{text} (default {shown})"


def _with_choices(flag: Flag, text: str) -> str:
    text = text.replace("%", "%%")
    choices = flag.choices
    if callable(choices) and not isinstance(choices, Mapping):
        text += f" One of: {', '.join(choices())}."
    return text


def _without_none(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if type(None) in typing.get_args(hint) and len(args) == 1 else hint


def _parser_of(flag: Flag, setting: Setting, key: str, many: bool) -> Callable[[str], Any]:
    """The text of a flag as its field's value (one item of it, for a tuple field): the
    flag's own parser, a choice's value, or the field's type. ``key``: the config key it
    sets, for errors ('' for a command's option: argparse names the flag)."""
    choices = flag.choices
    hint = _without_none(setting.type)
    item = typing.get_args(hint)[0] if many else setting.type

    def parse(text: str) -> Any:
        if flag.parse is not None:
            return flag.parse(text)
        if isinstance(choices, Mapping):
            if text not in choices:
                raise argparse.ArgumentTypeError(f"takes one of {', '.join(choices)}, got {text!r}")
            return choices[text]
        try:
            return convert(key or setting.name, text, item)
        except ValueError as err:
            message = str(err) if key else "takes " + str(err).split(" takes ", 1)[1]
            raise argparse.ArgumentTypeError(message) from None

    parse.__name__ = setting.name  # argparse names the type in its own messages
    return parse
