import importlib
import os
import shutil
import signal
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Callable, Sequence

import psutil
import pytest
import torch

# Extensions registered from outside rlfw (a toy sampler and algorithm): loaded before any
# test module, so every test that ranges over the registries covers them too. Worker
# processes inherit this path (spawn and forkserver send sys.path).
PLUGINS = Path(__file__).parent / "plugins"
sys.path.insert(0, str(PLUGINS))
PLUGIN_MODULES = [importlib.import_module(p.stem).__name__ for p in sorted(PLUGINS.glob("*.py"))]


def sampler_kinds(with_workers: bool = False) -> dict[str, Callable]:
    """``name -> make(env_factory, T, B, seed)`` for every registered sampler that runs any
    env (those with workers get 2), or only those with worker processes."""
    from rlfw.registry import SAMPLERS

    def make(spec, factory, batch_T, batch_B, seed, **kwargs):
        if spec.has_workers:
            kwargs.setdefault("n_workers", 2)
        return spec.build(factory, batch_T, batch_B, seed, **kwargs)

    return {
        s.name: partial(make, s)
        for s in SAMPLERS
        if s.runs_env is None and (s.has_workers or not with_workers)
    }


def pytest_configure(config):
    # A suite started in the background (`... &`, nohup) inherits SIGINT ignored, and Python
    # then never turns Ctrl-C into KeyboardInterrupt, here or in the CLI runs the Ctrl-C
    # tests start (an ignored signal stays ignored across exec). Handling it again here
    # gives them the signal a user's terminal would.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # The markers are declared in pyproject.toml. The suite's own key for sealed env pickles
    # (rlfw.runfolder.sealing), not the user's; worker and CLI subprocesses inherit it.
    if "RLFW_KEY_FILE" not in os.environ:
        os.environ["RLFW_KEY_FILE"] = os.path.join(
            tempfile.mkdtemp(prefix="rlfw-key-"), "pickle.key"
        )


@pytest.hookimpl(trylast=True)  # after -m has deselected what does not run
def pytest_collection_modifyitems(config, items):
    """Long tests first, split evenly: pytest-xdist's worksteal scheduler hands each of its
    N workers one contiguous share of the collection and steals from the ends, so the
    learning checks (slow) and whole-run tests (integration) are dealt in turn to the
    front of each share. Left in file order, most of them landed in one share and the
    suite ended with cores idle while one worker ran them."""
    heavy = {"slow": [], "integration": []}
    rest = []
    for item in items:
        kind = next((k for k in heavy if item.get_closest_marker(k)), None)
        (heavy[kind] if kind else rest).append(item)
    ordered = heavy["slow"] + heavy["integration"]
    # collection runs in each worker, where xdist clears numprocesses: its count is here
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    n = workers if isinstance(workers, int) and workers > 1 else 1
    out, remaining, taken = [], len(items), 0
    for i in range(n):  # worksteal's first split: len(pending) // nodes left, in turn
        share = remaining // (n - i)
        remaining -= share
        dealt = ordered[i::n]
        fill = max(0, share - len(dealt))
        out += dealt + rest[taken : taken + fill]
        taken += fill
    items[:] = out + rest[taken:]


def bits(x: torch.Tensor) -> torch.Tensor:
    return x.detach().reshape(-1).contiguous().view(torch.uint8)


def trees_equal(a, b) -> bool:
    """Bitwise equality of two trees of tensors (NaN == NaN when the bits match)."""
    from rlfw.buffers import tree_leaves

    la, lb = tree_leaves(a), tree_leaves(b)
    return len(la) == len(lb) and all(
        x.dtype == y.dtype and x.shape == y.shape and torch.equal(bits(x), bits(y))
        for x, y in zip(la, lb)
    )


@pytest.fixture
def counting_factory():
    from rlfw.envs import EnvFactory
    from rlfw.testing import CountingEnv

    return EnvFactory("counting", entry=CountingEnv)


def children() -> list[psutil.Process]:
    """Live descendant processes, except this process's own resource tracker and forkserver
    (started by multiprocessing, once; they exit with it). Workers forked by the forkserver
    share its command line but are its children, not ours: they count."""
    alive = []
    for p in psutil.Process().children(recursive=True):
        try:
            command = " ".join(p.cmdline())
            ours = p.ppid() == os.getpid() and (
                "resource_tracker" in command or "multiprocessing.forkserver" in command
            )
            if p.status() != psutil.STATUS_ZOMBIE and not ours:
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive


def shm_entries() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


@pytest.fixture(autouse=True)
def no_process_outlives_its_test():
    """Every test must close what it started: a worker left running fails the test that
    left it (and is killed, so the next test starts clean)."""
    yield
    deadline = time.monotonic() + 10
    while children() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = children()
    for p in left:
        p.kill()
    assert not left, f"processes left running: {[p.pid for p in left]}"


def _usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def _one_core_one_thread(cores: list[int] | None) -> None:
    if cores:
        os.sched_setaffinity(0, cores)
    torch.set_num_threads(1)


def map_in_processes(fn: Callable, jobs: Sequence[tuple], at_once: int | None = None) -> list:
    """``fn(*job)`` for every job, each in a fresh process of its own pinned to its own
    slice of the cores with one torch thread, as many at once as there are cores; results
    in job order. Learning checks run their seeds this way: a small MLP's run gains almost
    nothing from a second torch thread, so two seeds side by side take about the time of
    one. ``fn`` must be importable (a module-level function of a test module).

    ``at_once`` above the core count runs that many unpinned, sharing the cores: three
    jobs on two cores then take about 1.5 jobs' time instead of two waves' (the runs are
    deterministic whatever the timing, so sharing changes no result)."""
    from rlfw.launch.backends import LocalBackend
    from rlfw.samplers.machinery.workers import process_context

    def in_a_process(*job, cores):
        # forked from rlfw's forkserver, which imported torch once (about 1.2 s a process)
        with ProcessPoolExecutor(
            1,
            mp_context=process_context("forkserver"),
            initializer=_one_core_one_thread,
            initargs=(cores,),
        ) as pool:
            return pool.submit(fn, *job).result()

    backend = LocalBackend(at_once or max(1, min(len(jobs), _usable_cores())))
    return backend.map(in_a_process, jobs, report=lambda result: None)


# A short PPO CartPole run (checkpoints at 256 and 512 steps) that the run-folder tests copy.
TINY_TRAIN = [
    "train",
    "--algo",
    "ppo",
    "--env",
    "CartPole-v1",
    "--steps",
    "512",
    "--checkpoint-every",
    "256",
    "--eval-every",
    "256",
    "--eval-episodes",
    "2",
    "--no-progress",
]


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    from rlfw.cli import main

    run = tmp_path_factory.mktemp("trained") / "run"
    assert main([*TINY_TRAIN, "--log-dir", str(run)]) == 0
    return run


@pytest.fixture
def run(trained, tmp_path):
    """A copy of the tiny run's folder, the test's to change."""
    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    return copy
