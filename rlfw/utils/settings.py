"""Settings declared once: a config dataclass field's type and default are its declaration,
its help is the docstring written under it (the attribute-docstring convention that
mkdocstrings also reads), and a command-line flag, where it has one, is an ``Annotated``
marker on its type::

    @dataclass
    class RunConfig:
        batch_B: Annotated[int, Flag("--batch-B", "--n-envs")] = 8
        \"\"\"Envs stepped per batch: the B of [T, B].\"\"\"

``settings_of(cls)`` gives each field's name, type, default, help and flags; the CLI's
flags, ``--set`` typing, ``--help-config`` and the reference page all come from it.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
import typing
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

_NO_CONST = object()


@dataclass(frozen=True)
class Flag:
    """A command-line flag that sets the field it annotates.

    ``const``: the flag takes no value and sets this one (``--wandb`` sets True);
    ``choices``: the texts the flag accepts, mapped to the values they set (``--compile
    on`` sets True), or a callable listing the accepted texts (registry names);
    ``metavar``: how ``--help`` shows its value; ``help``: the flag's own help where it
    says more than the field's (one of several constant flags on a field); ``nargs='+'``:
    a tuple field takes its values after one flag (``--seeds 0 1 2``; without it each
    flag adds one: ``--plugin a --plugin b``); ``parse``: text to value where the field's
    type does not say it (``--n-workers auto``)."""

    names: tuple[str, ...]
    const: Any = _NO_CONST
    choices: Mapping[str, Any] | Callable[[], Sequence[str]] | None = None
    metavar: str | None = None
    help: str | None = None
    nargs: str | None = None
    parse: Callable[[str], Any] | None = None

    def __init__(
        self,
        *names: str,
        const: Any = _NO_CONST,
        choices: Mapping[str, Any] | Callable[[], Sequence[str]] | None = None,
        metavar: str | None = None,
        help: str | None = None,
        nargs: str | None = None,
        parse: Callable[[str], Any] | None = None,
    ):
        if not names or not all(n.startswith("--") for n in names):
            raise ValueError(f"a Flag needs one or more '--name's, got {names!r}")
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "const", const)
        object.__setattr__(self, "choices", choices)
        object.__setattr__(self, "metavar", metavar)
        object.__setattr__(self, "help", help)
        object.__setattr__(self, "nargs", nargs)
        object.__setattr__(self, "parse", parse)

    @property
    def takes_value(self) -> bool:
        return self.const is _NO_CONST


@dataclass(frozen=True)
class Setting:
    """One field of a config dataclass, as declared."""

    name: str
    type: Any  # the declared type, without its Annotated markers
    default: Any  # dataclasses.MISSING when the field has none
    help: str
    flags: tuple[Flag, ...]


def settings_of(cls: type) -> tuple[Setting, ...]:
    """Every field of dataclass ``cls`` with its help and flags (a subclass's field that
    repeats a parent's, e.g. with another default, keeps the parent's help and flags)."""
    return _settings_of(cls)


@functools.lru_cache(maxsize=None)
def _settings_of(cls: type) -> tuple[Setting, ...]:
    docs = field_docs(cls)
    # the nearest class whose declaration annotates the field: a subclass that only changes
    # a default (R2D1's n_step) keeps its parent's flags
    declared = [
        typing.get_type_hints(k, include_extras=True)
        for k in cls.__mro__
        if dataclasses.is_dataclass(k)
    ]
    out = []
    for f in dataclasses.fields(cls):
        hint = declared[0][f.name]
        flags: tuple[Flag, ...] = ()
        for hints in declared:
            found = hints.get(f.name)
            if found is not None and typing.get_origin(found) is typing.Annotated:
                flags = tuple(m for m in found.__metadata__ if isinstance(m, Flag))
                break
        if typing.get_origin(hint) is typing.Annotated:
            hint = typing.get_args(hint)[0]
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else f.default_factory()
            if f.default_factory is not dataclasses.MISSING
            else dataclasses.MISSING
        )
        out.append(Setting(f.name, hint, default, docs.get(f.name, ""), flags))
    return tuple(out)


def field_docs(cls: type) -> dict[str, str]:
    """``field -> docstring`` of the string literals written under ``cls``'s field
    declarations, and its dataclass bases' (the nearest class wins). Classes whose source
    cannot be read (defined in a REPL) contribute nothing."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        docs.update(_own_field_docs(klass))
    return docs


@functools.lru_cache(maxsize=None)
def _own_field_docs(cls: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    classes = [n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)]
    if not classes:
        return {}
    node = classes[0]
    out = {}
    body = node.body
    for stmt, following in zip(body, body[1:]):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            out[stmt.target.id] = inspect.cleandoc(following.value.value)
    return out


def type_name(hint: Any) -> str:
    """How ``--help-config`` and the reference show a field's type: ``int``,
    ``float | None``, ``tuple[int, ...]``."""
    if hint is type(None):
        return "None"
    if isinstance(hint, type) and typing.get_origin(hint) is None:
        return hint.__name__
    text = str(hint).replace("typing.", "")
    return (
        text.replace("Optional[", "").rstrip("]") + " | None"
        if text.startswith("Optional[")
        else text
    )
