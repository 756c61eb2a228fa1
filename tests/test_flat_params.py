import pytest
import torch
from torch import nn

from rlfw.algos.flat_params import FlatParameters


def test_grads_land_in_the_flat_buffer_and_match_ordinary_autograd():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    ref = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    ref.load_state_dict(net.state_dict())
    flat = FlatParameters(net.parameters())
    x = torch.randn(5, 3)
    for _ in range(2):  # second pass checks zero_grad really zeroes in place
        flat.zero_grad()
        net(x).pow(2).sum().backward()
    ref(x).pow(2).sum().backward()
    expected = torch.cat([p.grad.reshape(-1) for p in ref.parameters()])
    assert torch.allclose(flat.flat.grad, expected)
    assert net[0].weight.grad.data_ptr() == flat.flat.grad.data_ptr()


def test_load_state_dict_writes_through_and_clip_scales():
    net = nn.Linear(2, 2)
    flat = FlatParameters(net.parameters())
    net.load_state_dict({"weight": torch.ones(2, 2), "bias": torch.full((2,), 2.0)})
    assert flat.flat.tolist() == [1, 1, 1, 1, 2, 2]
    flat.flat.grad.copy_(torch.tensor([3.0, 4.0, 0, 0, 0, 0]))
    norm = flat.clip_grad_norm(1.0)
    assert norm.item() == pytest.approx(5.0)
    assert torch.linalg.vector_norm(flat.flat.grad).item() == pytest.approx(1.0, rel=1e-5)
    assert net.weight.grad[0].tolist() == pytest.approx([0.6, 0.8], rel=1e-5)


def test_refuses_mixed_dtypes():
    with pytest.raises(ValueError, match="one dtype"):
        FlatParameters([nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(2).double())])


def test_flat_parameters_keep_channels_last_layout():
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 8, 3).to(memory_format=torch.channels_last)
    before = conv.weight.detach().clone()
    flat = FlatParameters(conv.parameters())
    w = conv.weight
    assert w.is_contiguous(memory_format=torch.channels_last) and not w.is_contiguous()
    assert torch.equal(w, before) and w.stride() == before.stride()
    assert w.grad.stride() == w.stride()
    assert w.untyped_storage().data_ptr() == flat.flat.untyped_storage().data_ptr()
    # Autograd accumulates into the flat gradient through the strided views.
    conv(torch.randn(2, 4, 6, 6)).sum().backward()
    expected = torch.cat([conv.weight.grad.permute(0, 2, 3, 1).reshape(-1),
                          conv.bias.grad.reshape(-1)])
    assert torch.equal(flat.flat.grad, expected)
