import copy

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
    expected = torch.cat(
        [conv.weight.grad.permute(0, 2, 3, 1).reshape(-1), conv.bias.grad.reshape(-1)]
    )
    assert torch.equal(flat.flat.grad, expected)


def _adam_run(direct: bool, steps: int = 6):
    """A small MLP trained a few steps on fixed data through gradient_step, with the
    optimizer restored from its state_dict halfway and the lr changed (as a resume and an
    annealed schedule do)."""
    from unittest import mock

    from rlfw.algos import optim

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 3))
    flat = FlatParameters(model.parameters())
    opt = optim.make_optimizer(flat, "adam", lr=3e-3, eps=1e-5)
    x, y = torch.randn(32, 5), torch.randn(32, 3)
    kernel_steps = []

    def direct_step(optimizer):
        kernel_steps.append(optim_fused(optimizer))
        return kernel_steps[-1]

    optim_fused = optim._fused_adam_step
    with mock.patch.object(optim, "_fused_adam_step", direct_step if direct else lambda _: False):
        for i in range(steps):
            if i == steps // 2:
                opt.load_state_dict(copy.deepcopy(opt.state_dict()))
                optim.set_lr(opt, 1e-3)
            optim.gradient_step(opt, flat, ((model(x) - y) ** 2).mean(), max_grad_norm=0.5)
    if direct:  # the first step creates the state; every later one is the direct kernel call
        assert kernel_steps == [False] + [True] * (steps - 1)
    return flat.flat.detach().clone(), opt.state_dict()


def test_direct_fused_adam_step_is_torch_optims_step_bit_for_bit():
    direct_params, direct_state = _adam_run(direct=True)
    plain_params, plain_state = _adam_run(direct=False)
    assert torch.equal(direct_params, plain_params)
    (d,), (p,) = direct_state["state"].values(), plain_state["state"].values()
    assert float(d["step"]) == float(p["step"]) == 6
    assert all(torch.equal(d[k], p[k]) for k in ("exp_avg", "exp_avg_sq"))
    assert direct_state["param_groups"] == plain_state["param_groups"]


def _rmsprop_run(direct: bool, eps: float, weight_decay: float, steps: int = 6):
    """RMSprop through gradient_step on a net whose first input is always 0 (its weights'
    gradients and running averages stay exactly 0) and whose averages are seeded with
    subnormal values after the first step, restored from its state_dict halfway."""
    from unittest import mock

    from rlfw.algos import optim

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3))
    flat = FlatParameters(model.parameters())
    opt = optim.make_optimizer(flat, "rmsprop", lr=3e-3, eps=eps)
    opt.param_groups[0]["weight_decay"] = weight_decay
    x, y = torch.randn(32, 5), torch.randn(32, 3)
    x[:, 0] = 0.0
    direct_steps = []

    def direct_step(optimizer):
        direct_steps.append(optim_direct(optimizer))
        return direct_steps[-1]

    optim_direct = optim._rmsprop_step
    with mock.patch.object(optim, "_rmsprop_step", direct_step if direct else lambda _: False):
        for i in range(steps):
            if i == 1:
                opt.state[flat.flat]["square_avg"][-8:] = 1e-39  # subnormal in float32
            if i == steps // 2:
                opt.load_state_dict(copy.deepcopy(opt.state_dict()))
                optim.set_lr(opt, 1e-3)
            optim.gradient_step(opt, flat, ((model(x) - y) ** 2).mean(), max_grad_norm=None)
    if direct:
        took = eps >= optim._RMSPROP_MIN_EPS  # else torch's own step, the clamp unsafe
        assert direct_steps == [False] + [took] * (steps - 1)
    return flat.flat.detach().clone(), opt.state_dict()


@pytest.mark.parametrize("eps,weight_decay", [(1e-5, 0.0), (1e-10, 1e-3), (1e-12, 0.0)])
def test_direct_rmsprop_step_is_torch_optims_step_bit_for_bit(eps, weight_decay):
    direct_params, direct_state = _rmsprop_run(True, eps, weight_decay)
    plain_params, plain_state = _rmsprop_run(False, eps, weight_decay)
    (d,), (p,) = direct_state["state"].values(), plain_state["state"].values()
    if weight_decay == 0:  # the zero averages the clamp is for are there
        assert (p["square_avg"] == 0).any()
    assert torch.equal(direct_params, plain_params)
    assert float(d["step"]) == float(p["step"]) == 6
    assert torch.equal(d["square_avg"], p["square_avg"])
    assert direct_state["param_groups"] == plain_state["param_groups"]


@pytest.mark.parametrize("caller_flushes", [False, True])
def test_the_optimizer_step_flushes_subnormal_moments_and_restores_the_callers_setting(
    caller_flushes,
):
    """A parameter whose gradient went to zero (a ReLU unit that stopped firing): Adam's
    first moment decays by beta1 per step; from a subnormal value the step makes it 0, not
    0.9 x 1e-39 (which x86 computes on many times slower)."""
    from rlfw.algos import optim

    flat = FlatParameters([nn.Parameter(torch.ones(4))])
    opt = optim.make_optimizer(flat, "adam", lr=1e-3, eps=1e-5)
    flat.flat.grad = torch.ones(4)
    optim.step_optimizer(opt)  # creates the state
    state = opt.state[flat.flat]
    state["exp_avg"].fill_(1e-39)  # subnormal in float32
    assert state["exp_avg"][0].item() > 0
    flat.flat.grad = torch.zeros(4)
    torch.set_flush_denormal(caller_flushes)
    try:
        optim.step_optimizer(opt)
        assert optim._flushing_subnormals() is caller_flushes
    finally:
        torch.set_flush_denormal(False)
    assert state["exp_avg"].tolist() == [0.0] * 4
