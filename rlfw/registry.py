"""The registries of samplers, algorithms and runners: the mechanism only.

Each kind is declared once, beside its code (``rlfw.samplers.spec``, ``rlfw.algos.<family>.
spec``, ``rlfw.runners.spec``); this module collects rlfw's own and takes the user's.
Config validation, the CLI's choices, error texts and the docs' tables are all derived
from these registries. A user adds their own from a script, without editing rlfw::

    import rlfw
    rlfw.register_sampler("mine", MySampler)              # a SamplerBase subclass
    rlfw.register_algo("myalgo", MyAlgo, MyAlgoConfig, build_my_agent)
    rlfw.register_runner("myrunner", MyRunner)             # a Runner subclass
    config = RunConfig(sampler="mine", algo="myalgo")      # or --set sampler=mine

A registered algorithm's config is a dataclass with ``validate()``; it is reachable as
``config.algo_config("<name>")`` (and ``config.<name>``) and settable as
``--set <name>.<field>=...`` like the built-in ones.
"""

from __future__ import annotations

from dataclasses import replace as replaced
from typing import Any, Callable, Generic, Iterator, Sequence, TypeVar

from rlfw.algos.base import Algorithm
from rlfw.algos.dqn.spec import SPECS as DQN_FAMILY
from rlfw.algos.pg.spec import SPECS as PG_FAMILY
from rlfw.algos.qpg.spec import SPECS as QPG_FAMILY
from rlfw.algos.spec import (
    MODEL_SETTINGS,
    AgentBuilder,
    AlgoSpec,
    Preset,
    UnreadSettings,
    no_preset,
    reads_every_setting,
)
from rlfw.runners.base import Runner
from rlfw.runners.spec import SPECS as RUNNER_KINDS
from rlfw.runners.spec import RunnerSpec
from rlfw.samplers.base import Sampler
from rlfw.samplers.spec import SPECS as SAMPLER_KINDS
from rlfw.samplers.spec import SamplerOptions, SamplerSpec, sampler_spec

__all__ = [
    "ALGOS",
    "MODEL_SETTINGS",
    "RUNNERS",
    "SAMPLERS",
    "AlgoSpec",
    "Registry",
    "RunnerSpec",
    "SamplerSpec",
    "register_algo",
    "register_runner",
    "register_sampler",
    "sampler_table",
]

Spec = TypeVar("Spec", SamplerSpec, AlgoSpec, RunnerSpec)


class Registry(Generic[Spec]):
    """Named specs of one extension point, in the order they were registered."""

    def __init__(self, kind: str):
        self.kind = kind
        self._specs: dict[str, Spec] = {}

    def add(self, spec: Spec, replace: bool = False) -> Spec:
        """Register ``spec`` (its summary, when empty, the first paragraph of its class's
        docstring); ``ValueError`` for an empty name, or a taken one unless ``replace``."""
        if not isinstance(spec.name, str) or not spec.name:
            raise ValueError(f"a {self.kind} name must be non-empty text, got {spec.name!r}")
        if spec.name in self._specs and not replace:
            raise ValueError(
                f"{self.kind} {spec.name!r} is registered already; pass replace=True to replace it"
            )
        if not spec.summary:
            cls = spec.algo_cls if isinstance(spec, AlgoSpec) else spec.cls
            spec = replaced(spec, summary=_first_paragraph(cls))
        self._specs[spec.name] = spec
        return spec

    def remove(self, name: str) -> None:
        self.get(name)
        del self._specs[name]

    def get(self, name: str) -> Spec:
        """The spec of ``name``; ``ValueError`` naming it and what is registered."""
        try:
            return self._specs[name]
        except (KeyError, TypeError):
            raise ValueError(f"{self.kind} {name!r} unknown; choose from {self.names()}") from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[Spec]:
        return iter(list(self._specs.values()))


SAMPLERS: Registry[SamplerSpec] = Registry("sampler")
ALGOS: Registry[AlgoSpec] = Registry("algorithm")
RUNNERS: Registry[RunnerSpec] = Registry("runner")


def register_sampler(
    name: str,
    cls: type[Sampler],
    *,
    has_workers: bool | None = None,
    options: SamplerOptions | None = None,
    summary: str = "",
    runs_env: Callable[[str], bool] | None = None,
    env_note: str = "",
    worker_groups: int | None = None,
    replace: bool = False,
) -> SamplerSpec:
    """Make ``cls`` (a ``SamplerBase`` subclass) available as ``sampler=name`` (the
    defaults: ``rlfw.samplers.spec.sampler_spec``)."""
    spec = sampler_spec(
        name,
        cls,
        has_workers=has_workers,
        options=options,
        summary=summary,
        runs_env=runs_env,
        env_note=env_note,
        worker_groups=worker_groups,
    )
    return SAMPLERS.add(spec, replace)


def register_algo(
    name: str,
    algo_cls: type[Algorithm],
    config_cls: type,
    build_agent: AgentBuilder,
    *,
    summary: str = "",
    preset: Preset = no_preset,
    unread_model_settings: UnreadSettings = reads_every_setting,
    replace: bool = False,
) -> AlgoSpec:
    """Make ``algo_cls`` (an ``rlfw.algos.base.Algorithm``) available as ``algo=name``;
    ``config_cls()`` gives its default config, ``build_agent(run_config, spaces)`` the
    agent it trains, ``preset(env_id, family)`` its tuned settings and
    ``unread_model_settings`` the model fields that agent ignores (see ``AlgoSpec``)."""
    spec = AlgoSpec(name, algo_cls, config_cls, build_agent, summary, preset, unread_model_settings)
    return ALGOS.add(spec, replace)


def register_runner(
    name: str, cls: type[Runner], *, summary: str = "", replace: bool = False
) -> RunnerSpec:
    """Make ``cls`` (an ``rlfw.runners.Runner`` subclass) available as ``runner=name``."""
    return RUNNERS.add(RunnerSpec(name, cls, summary), replace)


def _first_paragraph(obj: Any) -> str:
    doc = (obj.__doc__ or "").strip()
    return doc.split("\n\n")[0].replace("\n", " ") if doc else ""


def sampler_table(specs: Sequence[SamplerSpec] | None = None) -> str:
    """The docs' table of samplers (default: all registered; docs/samplers.md holds rlfw's
    own and a test keeps it current)."""
    rows = ["| `--sampler` | class | envs | how it works |", "|---|---|---|---|"]
    for s in SAMPLERS if specs is None else specs:
        rows.append(f"| `{s.name}` | `{s.cls.__name__}` | {s.env_note or 'any'} | {s.summary} |")
    return "\n".join(rows)


# rlfw's own kinds, in the order the CLI and the docs list them
for _sampler in SAMPLER_KINDS:
    SAMPLERS.add(_sampler)
for _algo in (*PG_FAMILY, *DQN_FAMILY, *QPG_FAMILY):
    ALGOS.add(_algo)
for _runner in RUNNER_KINDS:
    RUNNERS.add(_runner)
