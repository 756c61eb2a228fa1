"""``torch.compile`` for the learner's loss functions, with inductor's on-disk caches.

Each algorithm compiles the pure part of its update (forward pass and loss, whose backward
AOTAutograd then compiles too); the optimizer step stays the fused eager kernel it already
is. Compiled code rounds differently from eager code (fused reductions), so a run is
bitwise reproducible against itself with or without compile, not across the two.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Callable, TypeVar, cast

import torch
from torch import nn

F = TypeVar("F", bound=Callable[..., Any])


# The CLI's --compile choices and the config values they stand for.
COMPILE_MODES: dict[str, bool | None] = {"auto": None, "on": True, "off": False}


def default_cache_dir() -> str:
    """``$XDG_CACHE_HOME/rlfw/inductor`` (``~/.cache/rlfw/inductor``): unlike inductor's
    default under /tmp, it survives a reboot. ``$TORCHINDUCTOR_CACHE_DIR`` overrides it."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "rlfw", "inductor")


def compile_loss(fn: F, setting: bool | None, model: nn.Module, n_grad_steps: int) -> F:
    """``fn`` compiled (one graph, static shapes: a batch's smaller last minibatch costs
    one more compile) if ``resolve_compile`` says so, else ``fn`` itself."""
    if setting and bool(getattr(model, "state_size", 0)):
        raise ValueError(
            "compile=true is not supported with a recurrent core (its sequences "
            "are cut where episodes start, a different graph per batch); use "
            "compile=false or auto"
        )
    if not resolve_compile(setting, model, n_grad_steps):
        return fn
    # Inductor reads the variable when it first needs its cache; a user's choice wins.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())
    # the compiled function takes and returns what ``fn`` does
    return cast(F, torch.compile(fn, dynamic=False, fullgraph=True))


def check_compile(value: object) -> tuple[object, bool, str]:
    """The ``check_config`` entry of an algorithm config's ``compile`` field."""
    return value, value is None or isinstance(value, bool), "true, false or null (auto)"


# What compiling costs and saves, measured on the 2-core reference machine (see
# docs/notes/2026-12-05-results-log.md, "Speed"): a cold compile of a loss and its backward
# takes about 40 s
# (a warm inductor cache: about 6 s); a gradient step of a CartPole-sized MLP saves about
# 0.6 ms (PPO's 64-64; DQN's 256-256 about 1.2 ms). The Nature CNN on the CPU gains
# nothing over its channels-last eager kernels (1.30x vs 1.31x over NCHW eager), so auto
# never compiles it; ``compile=True`` still does (on a GPU, where it can pay).
COLD_COMPILE_SECONDS = 40.0
STEP_SAVING_SECONDS = {"mlp": 0.6e-3, "cnn": 0.0}


def resolve_compile(setting: bool | None, model: nn.Module, n_grad_steps: int) -> bool:
    """``setting`` if given; else (auto) whether a run of ``n_grad_steps`` gradient steps
    wins back a cold compile, from the measured costs above. Depends on the configuration
    only, never on timing, so a run's numerics are reproducible."""
    if setting is not None:
        return setting
    if getattr(model, "state_size", 0):
        return False  # recurrent: cut where episodes start, a new graph per batch
    if not any(shutil.which(cc) for cc in ("g++", "c++", "clang++")):
        return False  # inductor's CPU backend needs a C++ compiler
    kind = "cnn" if any(isinstance(m, nn.Conv2d) for m in model.modules()) else "mlp"
    return n_grad_steps * STEP_SAVING_SECONDS[kind] > COLD_COMPILE_SECONDS
