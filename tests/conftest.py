import pytest
import torch


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: learning checks (minutes); CI runs them too")


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
