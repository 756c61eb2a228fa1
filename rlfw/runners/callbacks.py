"""Callbacks: observers a runner calls at fixed points of a run, for custom metrics and
stopping rules without subclassing a runner (SB3's callbacks, Sample Factory's
``AlgoObserver``).

A callback is any object with one or more of these methods; it subclasses nothing:

- ``on_start(runner)``: once the sampler runs and any checkpoint is loaded.
- ``on_iteration(metrics) -> bool | None``: after each update. ``metrics`` holds
  ``iteration``, ``env_steps``, the update's statistics (``train/...``) and, when episodes
  ended in the batch, ``rollout/return_mean``, ``rollout/length_mean``,
  ``rollout/episodes``. Returning ``False`` stops the run cleanly, writing a checkpoint.
- ``on_eval(metrics)``: after each evaluation, with ``env_steps`` and ``eval/...``.
- ``on_checkpoint(path, env_steps)``: after a checkpoint is written.
- ``on_end(result)``: when the run ends normally or by Ctrl-C (a ``TrainResult``).

Only the chief rank of a multi-rank run calls them; its stop decision reaches every rank.
"""

from __future__ import annotations

from typing import Any, Iterable, Protocol

HOOKS = ("on_start", "on_iteration", "on_eval", "on_checkpoint", "on_end")


class Callback(Protocol):
    """For typing only: a callback implements any subset of these."""

    def on_iteration(self, metrics: dict[str, float]) -> bool | None: ...


def callback_name(callback: Any) -> str:
    return type(callback).__qualname__


def check_callback(callback: Any) -> None:
    """``ValueError`` naming ``callback`` unless it has at least one hook."""
    if not any(callable(getattr(callback, hook, None)) for hook in HOOKS):
        raise ValueError(
            f"callback {callback_name(callback)} has none of the hooks "
            f"{', '.join(HOOKS)}: it would never be called"
        )


class CallbackList:
    """The run's callbacks, each called in the order given for the hooks it has."""

    def __init__(self, callbacks: Iterable[Any] = ()):
        self.callbacks = list(callbacks)
        for callback in self.callbacks:
            check_callback(callback)

    def __bool__(self) -> bool:
        return bool(self.callbacks)

    def _call(self, hook: str, *args: Any) -> list[tuple[Any, Any]]:
        out = []
        for callback in self.callbacks:
            method = getattr(callback, hook, None)
            if callable(method):
                out.append((callback, method(*args)))
        return out

    def on_start(self, runner: Any) -> None:
        self._call("on_start", runner)

    def on_iteration(self, metrics: dict[str, float]) -> str | None:
        """The name of the first callback that asked to stop (returned ``False``), else
        ``None``. Every callback sees every iteration, the stopping one included."""
        stoppers = [
            callback_name(c) for c, answer in self._call("on_iteration", metrics) if answer is False
        ]
        return stoppers[0] if stoppers else None

    def on_eval(self, metrics: dict[str, float]) -> None:
        self._call("on_eval", metrics)

    def on_checkpoint(self, path: str, env_steps: int) -> None:
        self._call("on_checkpoint", path, env_steps)

    def on_end(self, result: Any) -> None:
        self._call("on_end", result)
