"""What declares a sampler kind to the rest of rlfw (``SamplerSpec``), and rlfw's own kinds.
``rlfw.registry`` collects these; config validation, the CLI's choices, errors and the
docs' table of samplers come from them."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence, cast

from rlfw.envs import is_atari
from rlfw.samplers.base import Sampler
from rlfw.samplers.native_atari import NativeAtariSampler
from rlfw.samplers.parallel_cpu import ParallelCpuSampler
from rlfw.samplers.parallel_gpu import AlternatingSampler, ParallelGpuSampler
from rlfw.samplers.queue import QueueSampler
from rlfw.samplers.serial import SerialSampler

# What a run's config gives a sampler beyond sizes and seed: (config, worker cores) -> kwargs.
SamplerOptions = Callable[[Any, Sequence[int] | None], dict[str, Any]]

# A sampler class as called: ``cls(env_factory, batch_T=, batch_B=, seed=, ...)``, by
# ``SamplerBase``'s constructor convention, which ``type[Sampler]`` (a protocol, with no
# constructor) cannot state.
SamplerConstructor = Callable[..., Sampler]


def no_options(config: Any, worker_cores: Sequence[int] | None) -> dict[str, Any]:
    return {}


def worker_options(config: Any, worker_cores: Sequence[int] | None) -> dict[str, Any]:
    """Samplers with worker processes: their count, pinning (to the affinity plan's cores)
    and start method."""
    pin = (worker_cores or True) if config.pin_cpus else False
    return {"n_workers": config.n_workers, "pin_cpus": pin, "start_method": config.start_method}


def native_options(config: Any, worker_cores: Sequence[int] | None) -> dict[str, Any]:
    return {"n_threads": config.n_workers}  # ALE's native threads stand for the workers


@dataclass(frozen=True)
class SamplerSpec:
    """A sampler kind: its class (built as ``cls(env_factory, batch_T=, batch_B=, seed=,
    n_eval_envs=, n_eval_workers=, **options(config, worker_cores))``), whether it has a
    worker count to set or tune (and into how many equal groups the workers split), and
    which env ids it runs (``None``: any)."""

    name: str
    cls: type[Sampler]
    summary: str = ""
    options: SamplerOptions = no_options
    has_workers: bool = False
    runs_env: Callable[[str], bool] | None = None
    env_note: str = ""  # what it runs, for errors, when not every env
    worker_groups: int = 1  # the worker count must be a multiple of this
    rebuildable_frames: bool = True
    """Its stacked-frame observations begin an episode with the reset frame repeated
    (gymnasium's FrameStackObservation), so a replay may keep one frame per row and rebuild
    the stacks; ale-py's native vector env stacks the frames before the episode's first."""

    def build(
        self, env_factory: Any, batch_T: int, batch_B: int, seed: int = 0, **kwargs: Any
    ) -> Sampler:
        """The sampler with these sizes; ``kwargs`` are the class's own (``n_workers``...)."""
        make = cast(SamplerConstructor, self.cls)
        return make(env_factory, batch_T=batch_T, batch_B=batch_B, seed=seed, **kwargs)


def takes_n_workers(cls: type) -> bool:
    """Whether any constructor along ``cls``'s MRO names ``n_workers`` (a subclass's
    ``__init__(*args, **kwargs)`` forwards it to its base's)."""
    return any(
        "n_workers" in inspect.signature(k.__init__).parameters  # type: ignore[misc]
        for k in cls.__mro__
        if "__init__" in vars(k)
    )


def sampler_spec(
    name: str,
    cls: type[Sampler],
    *,
    has_workers: bool | None = None,
    options: SamplerOptions | None = None,
    summary: str = "",
    runs_env: Callable[[str], bool] | None = None,
    env_note: str = "",
    worker_groups: int | None = None,
    rebuildable_frames: bool = True,
) -> SamplerSpec:
    """The spec of ``cls`` (a ``SamplerBase`` subclass) as ``sampler=name``. By default a
    class whose constructor takes ``n_workers`` gets the worker options (count, pinning,
    start method) from the run's config, and its workers form ``cls.n_groups`` groups
    (an int class attribute; else one)."""
    if has_workers is None:
        has_workers = takes_n_workers(cls)
    if options is None:
        options = worker_options if has_workers else no_options
    if worker_groups is None:
        declared = getattr(cls, "n_groups", 1)
        worker_groups = declared if isinstance(declared, int) and has_workers else 1
    return SamplerSpec(
        name,
        cls,
        summary,
        options,
        has_workers,
        runs_env,
        env_note,
        worker_groups,
        rebuildable_frames,
    )


SPECS = (
    sampler_spec(
        "serial",
        SerialSampler,
        has_workers=False,
        summary="this process steps all B envs and runs the policy batched over B",
    ),
    sampler_spec(
        "cpu",
        ParallelCpuSampler,
        summary="N workers step B/N envs each with their own CPU copy of the agent, "
        "into shared memory; one message per batch, weights via shared memory",
    ),
    sampler_spec(
        "gpu",
        ParallelGpuSampler,
        summary="N workers only step envs; the master runs one batched forward pass "
        "over B (on cuda if the agent is there); two semaphores per worker "
        "per step",
    ),
    sampler_spec(
        "alternating",
        AlternatingSampler,
        summary="as gpu with two worker groups: the master runs one group's forward "
        "pass while the other group steps",
    ),
    sampler_spec(
        "native",
        NativeAtariSampler,
        has_workers=True,
        options=native_options,
        runs_env=is_atari,
        env_note="ALE games only ('ALE/<Game>-v5')",
        rebuildable_frames=False,
        summary="ale-py's C++ threads step and preprocess the games in two "
        "AtariVectorEnv groups; the master picks one group's actions while "
        "the other steps; lives, clipping and game statistics once per batch",
    ),
    sampler_spec(
        "queue",
        QueueSampler,
        summary="GA3C: N actor processes post observations to a prediction queue; "
        "the master batches whatever is waiting (up to a cap) into one "
        "forward pass and routes the actions back",
    ),
)
