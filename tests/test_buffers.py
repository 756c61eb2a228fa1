import numpy as np
import pytest
import torch

from rlfw.buffers import AgentInfo, Samples, allocate, tree_index, tree_leaves


def example():
    return Samples(
        observation=torch.zeros(4, 84, 84, dtype=torch.uint8),
        action=torch.tensor(0),
        reward=torch.tensor(0.0),
        terminated=torch.tensor(False),
        truncated=torch.tensor(False),
        agent_info=AgentInfo(torch.tensor(0.0), torch.tensor(0.0)),
        bootstrap_value=torch.tensor(0.0),
    )


def test_allocate_shapes_dtypes_from_one_example():
    buf = allocate(example(), (5, 3))
    assert buf.observation.shape == (5, 3, 4, 84, 84)
    assert buf.observation.dtype == torch.uint8
    assert buf.action.dtype == torch.int64 and buf.action.shape == (5, 3)
    assert buf.terminated.dtype == torch.bool
    assert buf.agent_info.value.shape == (5, 3)
    assert all(leaf.sum() == 0 for leaf in tree_leaves(buf))


def test_indexing_applies_to_every_leaf_and_gives_views():
    buf = allocate(example(), (5, 3))
    step = buf[2, 1]
    assert isinstance(step, Samples) and isinstance(step.agent_info, AgentInfo)
    assert step.observation.shape == (4, 84, 84) and step.reward.shape == ()
    column = buf[:, 1]
    assert column.reward.shape == (5,)
    column.reward[:] = 7.0  # a view: writes reach the buffer
    assert buf.reward[:, 1].tolist() == [7.0] * 5 and buf.reward[:, 0].sum() == 0
    assert tree_index(buf, (slice(1, 3), 0)).action.shape == (2,)


def test_leafwise_assignment_from_numpy_and_scalars():
    buf = allocate(example(), (2, 2))
    buf[1, 0] = Samples(
        np.full((4, 84, 84), 9, np.uint8), 2, 1.5, True, False, AgentInfo(-0.5, 3.0), 4.0
    )
    assert buf.observation[1, 0].min() == 9 and buf.observation[0, 0].max() == 0
    assert buf.action[1, 0] == 2 and buf.reward[1, 0] == 1.5 and bool(buf.terminated[1, 0])
    assert buf.agent_info.logp[1, 0] == -0.5 and buf.bootstrap_value[1, 0] == 4.0


def test_row_writes_through_numpy_views_reach_the_tensors():
    from rlfw.buffers.tree import numpy_views, tree_assign

    buf = allocate(example(), (3, 4))
    info = AgentInfo(torch.zeros(3, 4), torch.zeros(3, 4, dtype=torch.bfloat16))
    rows, info_rows = numpy_views(buf), numpy_views(info)
    assert isinstance(rows.agent_info.logp, np.ndarray)
    assert isinstance(info_rows.value, torch.Tensor)  # numpy has no bfloat16: stays a tensor
    tree_assign(
        rows.agent_info,
        (1, slice(2, 4)),
        AgentInfo(torch.tensor([1.0, 2.0]), np.array([3.0, 4.0], np.float32)),
    )
    tree_assign(info_rows, 2, AgentInfo(torch.ones(4), torch.full((4,), 0.5)))
    assert buf.agent_info.logp[1].tolist() == [0, 0, 1, 2]
    assert buf.agent_info.value[1].tolist() == [0, 0, 3, 4] and buf.agent_info.value.sum() == 7
    assert info.logp[2].tolist() == [1] * 4 and info.value[2].tolist() == [0.5] * 4


def test_shared_memory_allocation():
    buf = allocate(example(), (2, 2), shared=True)
    assert all(leaf.is_shared() for leaf in tree_leaves(buf))


def test_debug_fill_marks_unwritten_slots():
    buf = allocate(example(), (2, 2), debug_fill=True)
    assert torch.isnan(buf.reward).all() and torch.isnan(buf.agent_info.value).all()
    assert (buf.observation == 255).all() and (buf.action == torch.iinfo(torch.int64).max).all()


@pytest.mark.parametrize("dims", [(0, 2), (3, -1), (2.5, 1)])
def test_bad_leading_dims_raise(dims):
    with pytest.raises(ValueError, match="leading_dims"):
        allocate(example(), dims)
