"""``compile``: compiled losses learn like eager ones, are reproducible against themselves,
and the auto rule turns compiling on only where a run wins back the compile time."""

import pytest
import torch
from torch import nn

from rlfw.algos import A2CConfig, DQNConfig, PPOConfig
from rlfw.algos.compile import resolve_compile
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig
from rlfw.models.cnn import NatureCNN
from rlfw.runners import RunSchedule


def _train(algo: str, compile: bool | None) -> dict[str, torch.Tensor]:
    config = RunConfig(algo=algo, env="CartPole-v1", batch_B=4, batch_T=16, seed=3)
    config.ppo.epochs, config.ppo.minibatch_size = 2, 32
    config.dqn.learning_starts, config.dqn.replay_ratio, config.dqn.batch_size = 64, 0.5, 32
    config.algo_config().compile = compile
    config.schedule = RunSchedule(
        n_steps=4 * 16 * 4, eval_every=None, log_every=10_000, checkpoint_every=10_000
    )
    with build_runner(config, None, progress=False, stdout=False) as runner:
        runner.train()
        return {k: v.clone() for k, v in runner.agent.model.state_dict().items()}


@pytest.mark.parametrize("algo", ["ppo", "a2c", "dqn"])
@pytest.mark.integration
def test_compiled_loss_is_reproducible_and_close_to_eager(algo):
    eager = _train(algo, False)
    first, second = _train(algo, True), _train(algo, True)
    for key in eager:
        assert torch.equal(first[key], second[key]), key  # bitwise against itself
        # Fused kernels round differently; after a few updates the weights still agree
        # to float noise (a wrong loss would be off by the learning rate's order).
        assert torch.allclose(first[key], eager[key], rtol=0, atol=1e-5), key
    moved = max((eager[k] - _initial(algo)[k]).abs().max() for k in eager)
    assert moved > 1e-4  # the comparison above compared trained weights


def _initial(algo: str) -> dict[str, torch.Tensor]:
    config = RunConfig(algo=algo, env="CartPole-v1", batch_B=4, batch_T=16, seed=3)
    config.dqn.learning_starts = 32  # inside the run (no update is made: nothing is run)
    config.schedule = RunSchedule(n_steps=64, eval_every=None)
    with build_runner(config, None, progress=False, stdout=False) as runner:
        return {k: v.clone() for k, v in runner.agent.model.state_dict().items()}


def test_auto_rule_compiles_only_runs_long_enough():
    mlp = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 2))
    cnn = NatureCNN()
    assert resolve_compile(None, mlp, 10_000) is False  # CartPole-sized run: eager
    assert resolve_compile(None, mlp, 1_000_000) is True
    # channels-last eager convolutions are as fast as compiled ones on the CPU
    assert resolve_compile(None, cnn, 10**7) is False
    assert resolve_compile(False, cnn, 10**9) is False  # an explicit choice wins
    assert resolve_compile(True, mlp, 1) is True


@pytest.mark.parametrize("config_cls", [PPOConfig, A2CConfig, DQNConfig])
def test_bad_compile_value_is_named(config_cls):
    with pytest.raises(ValueError, match=r"compile.*'yes'.*true, false or null"):
        config_cls(compile="yes").validate()
