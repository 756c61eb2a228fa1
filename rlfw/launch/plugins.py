"""Modules a run needs imported (``--plugin``): what registers a user's envs, samplers or
algorithms. rlfw imports a module only when the user chose it: named on the command line,
or installed as a package that declares an entry point in the ``rlfw.plugins`` group. A run
folder's config.json may say which it needs, never import one by itself."""

from __future__ import annotations

import importlib
from typing import Any, Sequence

from rlfw.envs import env_module
from rlfw.runners.callbacks import HOOKS, check_callback

ENTRY_POINT_GROUP = "rlfw.plugins"


def load_installed_plugins() -> list[str]:
    """Load every installed ``rlfw.plugins`` entry point (``[project.entry-points."rlfw.
    plugins"] mine = "mypkg.rlfw_plugin"``); returns their modules. ``ValueError`` naming
    one that fails to load."""
    from importlib.metadata import entry_points

    modules = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            point.load()
        except Exception as err:  # the user's package: report it by name, whatever it raised
            raise ValueError(
                f"installed rlfw plugin {point.name!r} ({point.value}) failed to "
                f"load: {type(err).__name__}: {err}"
            ) from None
        modules.append(point.module)
    return modules


def import_plugins(names: Sequence[str]) -> None:
    """Import each named module (``ValueError`` naming one that fails to import)."""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as err:
            raise ValueError(f"--plugin {name}: cannot import it: {err}") from None


def modules_needed(env: str, plugins: Sequence[str]) -> list[str]:
    """The modules a run of ``env`` recorded with ``plugins`` needs imported."""
    module = env_module(env)
    return list(dict.fromkeys([*plugins, *([module] if module else [])]))


def check_named(env: str, plugins: Sequence[str], named: Sequence[str], source: str) -> None:
    """``ValueError`` unless every module the run from ``source`` (a run folder's or a
    config file's) needs is named on the command line (``named``)."""
    missing = [m for m in modules_needed(env, plugins) if m not in named]
    if not missing:
        return
    why = (
        f"its env id {env!r} imports module {env_module(env)!r}"
        if env_module(env) in missing
        else f"it was trained with --plugin {' --plugin '.join(missing)}"
    )
    raise ValueError(
        f"{source} needs module(s) {', '.join(map(repr, missing))} imported "
        f"({why}); rlfw imports a module only when your command line names it: "
        f"add {' '.join('--plugin ' + m for m in missing)} if you trust it"
    )


def load_callbacks(specs: Sequence[str]) -> list[Any]:
    """``--callback MODULE:NAME`` each: import MODULE (the command line names it, so it may
    run), construct class NAME without arguments. ``ValueError`` in one line naming the spec
    when the module does not import, NAME is not a class there, or it has no hook."""
    out = []
    for spec in specs:
        module_name, sep, name = spec.partition(":")
        if not sep or not module_name or not name:
            raise ValueError(
                f"--callback {spec}: takes MODULE:NAME, e.g. my_callbacks:StopAtReturn"
            )
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise ValueError(
                f"--callback {spec}: cannot import module {module_name!r}: {err}"
            ) from None
        cls = getattr(module, name, None)
        if not isinstance(cls, type):
            raise ValueError(
                f"--callback {spec}: module {module_name!r} has no class "
                f"{name!r}" + ("" if cls is None else f" ({name} is a {type(cls).__name__})")
            )
        try:
            check_callback(cls)
        except ValueError:
            raise ValueError(
                f"--callback {spec}: class {name} has none of the hooks {', '.join(HOOKS)}"
            ) from None
        try:
            out.append(cls())
        except TypeError as err:
            raise ValueError(f"--callback {spec}: {name}() must take no arguments: {err}") from None
    return out
