import os
import time

import psutil
import pytest
import torch


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: learning checks (minutes); CI runs them too")
    config.addinivalue_line("markers", "isolated: asserts machine-wide state (/dev/shm) that "
                                       "tests running beside it (pytest -n) would change")


def bits(x: torch.Tensor) -> torch.Tensor:
    return x.detach().reshape(-1).contiguous().view(torch.uint8)


def trees_equal(a, b) -> bool:
    """Bitwise equality of two trees of tensors (NaN == NaN when the bits match)."""
    from rlfw.buffers import tree_leaves

    la, lb = tree_leaves(a), tree_leaves(b)
    return len(la) == len(lb) and all(
        x.dtype == y.dtype and x.shape == y.shape and torch.equal(bits(x), bits(y))
        for x, y in zip(la, lb))


@pytest.fixture
def counting_factory():
    from rlfw.envs import EnvFactory
    from rlfw.testing import CountingEnv

    return EnvFactory("counting", entry=CountingEnv)


def children() -> list[psutil.Process]:
    """Live child processes, except Python's own resource tracker (one per parent process,
    started by the spawn machinery, and it exits with the parent)."""
    alive = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(
                    p.cmdline()):
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
