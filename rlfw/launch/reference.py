"""Every config key with its type, default, flag and help, from the fields' declarations
(``rlfw.utils.settings``): ``rlfw train --help-config`` (with the preset's value for an
algorithm and env) and the manual's reference page (every registered algorithm)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from rlfw.launch.config import RunConfig, flatten, set_argument
from rlfw.registry import ALGOS
from rlfw.utils.settings import settings_of, type_name


@dataclass(frozen=True)
class KeyDoc:
    """One settable key of a run."""

    key: str
    type: str
    default: Any
    help: str
    flags: tuple[str, ...]


def key_docs(algos: list[str] | None = None) -> list[KeyDoc]:
    """The keys of a run: its own fields, its groups (schedule, atari, wandb) and the
    configs of ``algos`` (default: every registered algorithm)."""
    out: list[KeyDoc] = []
    for setting in settings_of(RunConfig):
        if setting.name in ALGOS:
            continue
        group = setting.default
        if dataclasses.is_dataclass(group):
            out += _group(setting.name, type(group))
        else:
            out.append(_doc(setting.name, setting))
    for name in ALGOS.names() if algos is None else algos:
        out += _group(name, ALGOS.get(name).config_cls)
    return out


def _group(prefix: str, cls: type) -> list[KeyDoc]:
    return [_doc(f"{prefix}.{s.name}", s) for s in settings_of(cls)]


def _doc(key: str, setting: Any) -> KeyDoc:
    flags = tuple(name for flag in setting.flags for name in flag.names)
    return KeyDoc(key, type_name(setting.type), setting.default, setting.help, flags)


def _shown(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "(required)"
    return set_argument("", value)[1:]  # as --set takes it back: none, true, 64,64


def help_config(algo: str, env: str) -> str:
    """``rlfw train --help-config``: every key of the run ``--algo ALGO --env ENV`` builds,
    with its type, default, the preset's value where it differs, its flags and help."""
    preset = dict(flatten(RunConfig.for_env(env, algo).to_dict()))
    lines = [
        f"Config keys of `rlfw train --algo {algo} --env {env}` (set any with --set "
        "KEY=VALUE; * marks where the preset differs from the default):",
        "",
    ]
    for doc in key_docs([algo]):
        value = preset.get(doc.key, doc.default)
        differs = value != doc.default
        head = f"{'*' if differs else ' '} {doc.key}: {doc.type} = {_shown(value)}"
        if differs:
            head += f"  (default {_shown(doc.default)})"
        if doc.flags:
            head += f"  [{', '.join(doc.flags)}]"
        lines += [head, f"      {' '.join(doc.help.split())}"]
    return "\n".join(lines)


def reference_markdown() -> str:
    """The manual's page of every config key (``docs/reference/config.md``)."""
    lines = [
        "# Config reference",
        "",
        "Every key a run has, generated from the config fields' declarations "
        "(`python -m rlfw.launch.reference`). Set any with `rlfw train --set "
        "KEY=VALUE`; a flag, where there is one, sets the same key. `rlfw train "
        "--help-config --algo ALGO --env ENV` prints the preset's value of each for "
        "that run. An algorithm's keys are read only in runs of that algorithm.",
        "",
    ]
    group = None
    for doc in key_docs():
        name = doc.key.split(".")[0] if "." in doc.key else "run"
        if name != group:
            group = name
            lines += [
                "",
                f"## {group}",
                "",
                "| key | type | default | flag | help |",
                "|---|---|---|---|---|",
            ]
        lines.append(_table_row(doc))
    return "\n".join(lines) + "\n"


def _table_row(doc: KeyDoc) -> str:
    """``doc`` as a row of the reference's tables: key, type, default, flags, help."""
    flags = ", ".join(f"`{f}`" for f in doc.flags)
    text = " ".join(doc.help.split()).replace("|", "\\|")
    return f"| `{doc.key}` | `{doc.type}` | `{_shown(doc.default)}` | {flags} | {text} |"


def algo_key_docs(algo: str) -> list[KeyDoc]:
    """The keys of one registered algorithm's own config (``<algo>.<field>``, every field
    of its ``config_cls``, in declaration order)."""
    return _group(algo, ALGOS.get(algo).config_cls)


def algo_settings_markdown(algo: str) -> str:
    """The settings table of ``algo``'s page in the manual (``docs/algorithms/<algo>.md``):
    every key of its config with its type, default, flags and help."""
    lines = ["| key | type | default | flag | help |", "|---|---|---|---|---|"]
    lines += [_table_row(doc) for doc in algo_key_docs(algo)]
    return "\n".join(lines)


if __name__ == "__main__":
    print(reference_markdown(), end="")
