"""Search spaces for ``rlfw tune``: what each setting of a run may take, declared beside
each algorithm's spec (``AlgoSpec.search_space``) and overridable from the command line
(``--space ppo.learning_rate=1e-5:1e-2:log``).

A ``Param`` names a config key (``ppo.learning_rate``, ``batch_T``, ``hidden``) and a
range or a list of choices; ``transform`` maps what the sampler draws onto the value
(``one_minus``: 1 - x, for discounts on a log scale; ``pow2``: 2 ** x, for sizes), as
rl-baselines3-zoo's samplers draw them."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Protocol

TRANSFORMS = ("one_minus", "pow2")


class Trial(Protocol):
    """What a ``Param`` asks of an Optuna trial (``optuna.Trial``)."""

    def suggest_float(self, name: str, low: float, high: float, *, log: bool = False) -> float: ...

    def suggest_int(self, name: str, low: int, high: int, *, log: bool = False) -> int: ...

    def suggest_categorical(self, name: str, choices: Any) -> Any: ...


@dataclass(frozen=True)
class Param:
    """One setting's range (``low``..``high``, ``log``, ``integer``) or ``choices``, and
    the ``transform`` from the drawn number to the value."""

    key: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False
    choices: tuple[Any, ...] = ()
    transform: str | None = None

    def __post_init__(self) -> None:
        if self.choices:
            return
        if self.low is None or self.high is None or not self.low < self.high:
            raise ValueError(
                f"search space {self.key!r}: a range needs low < high, got "
                f"{self.low!r}:{self.high!r}"
            )
        if self.log and self.low <= 0:
            raise ValueError(f"search space {self.key!r}: a log range needs low > 0")
        if self.transform not in (None, *TRANSFORMS):
            raise ValueError(
                f"search space {self.key!r}: transform {self.transform!r} is not one of "
                f"{list(TRANSFORMS)}"
            )

    @property
    def drawn_name(self) -> str:
        """The name the sampler sees: the key, or ``one_minus(ppo.gamma)``."""
        return f"{self.transform}({self.key})" if self.transform else self.key

    def value_of(self, drawn: Any) -> Any:
        """The setting's value for what the sampler drew."""
        if self.transform == "one_minus":
            return 1.0 - float(drawn)
        if self.transform == "pow2":
            return 2 ** int(drawn)
        return drawn

    def suggest(self, trial: Trial) -> Any:
        """Draw this setting's value in ``trial``."""
        if self.choices:
            # Optuna stores choices as plain values: a tuple (a layer list) goes as text
            texts = [repr(c) if isinstance(c, tuple) else c for c in self.choices]
            drawn = trial.suggest_categorical(self.drawn_name, texts)
            return ast.literal_eval(drawn) if isinstance(drawn, str) and drawn[:1] == "(" else drawn
        assert self.low is not None and self.high is not None  # a range (__post_init__)
        if self.integer:
            number: Any = trial.suggest_int(
                self.drawn_name, int(self.low), int(self.high), log=self.log
            )
        else:
            number = trial.suggest_float(self.drawn_name, self.low, self.high, log=self.log)
        return self.value_of(number)

    def extremes(self) -> list[Any]:
        """The values at the ends of the range (or every choice): what ``validate`` must
        accept for the space to be usable."""
        if self.choices:
            return list(self.choices)
        assert self.low is not None and self.high is not None
        ends = [self.low, self.high]
        if self.integer:
            ends = [int(e) for e in ends]
        return [self.value_of(e) for e in ends]


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_param(text: str) -> Param:
    """``KEY=LOW:HIGH[:log][:int]`` (a range) or ``KEY=A,B,C`` (choices; ``|`` separates
    choices that are themselves lists: ``hidden=64|64,64|256,256``); ``ValueError`` naming
    what is wrong."""
    key, sep, spec = text.partition("=")
    key, spec = key.strip(), spec.strip()
    if not sep or not key or not spec:
        raise ValueError(
            f"--space {text!r} is not KEY=LOW:HIGH[:log][:int] or KEY=A,B,C "
            "(e.g. ppo.learning_rate=1e-5:1e-2:log, ppo.epochs=4,10)"
        )
    if ":" in spec:
        low, high, *flags = spec.split(":")
        unknown = [f for f in flags if f not in ("log", "int")]
        if unknown:
            raise ValueError(f"--space {text!r}: unknown flag {unknown[0]!r} (log, int)")
        try:
            lo, hi = float(low), float(high)
        except ValueError:
            raise ValueError(f"--space {text!r}: the range's ends must be numbers") from None
        integer = "int" in flags
        if integer and not (lo.is_integer() and hi.is_integer()):
            raise ValueError(f"--space {text!r}: an int range needs whole ends")
        return Param(key, lo, hi, log="log" in flags, integer=integer)
    if "|" in spec:
        choices = tuple(tuple(_literal(v) for v in part.split(",")) for part in spec.split("|"))
    else:
        choices = tuple(_literal(v) for v in spec.split(","))
    return Param(key, choices=choices)


def merged(space: tuple[Param, ...], overrides: list[Param]) -> tuple[Param, ...]:
    """``space`` with each override replacing the param of its key (or added)."""
    by_key = {p.key: p for p in space}
    for param in overrides:
        by_key[param.key] = param
    return tuple(by_key.values())
