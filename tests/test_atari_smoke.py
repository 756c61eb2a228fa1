"""Two PPO iterations on real Pong, end to end through the runner."""

import pytest
import torch

from rlfw.envs import AtariOptions
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.runners import RunSchedule


@pytest.mark.integration
def test_ppo_pong_two_iterations(tmp_path):
    config = apply_overrides(RunConfig(algo="ppo", env="ALE/Pong-v5"), preset("ppo", "ALE/Pong-v5"))
    config.batch_B, config.batch_T, config.n_eval_envs = 2, 16, 1
    config.schedule = RunSchedule(
        n_steps=64, eval_every=10_000, eval_episodes=1, checkpoint_every=10_000
    )
    config.atari = AtariOptions(max_episode_frames=400)  # keep the eval game short
    runner = build_runner(config, str(tmp_path), progress=False, stdout=False)
    seen = []
    real = runner.sampler.obtain_samples

    def record(itr):
        samples, eps = real(itr)
        seen.append(
            (
                samples.observation.dtype,
                tuple(samples.observation.shape),
                int(samples.observation.max()),
            )
        )
        return samples, eps

    runner.sampler.obtain_samples = record
    with runner:  # closes the sampler and its evaluation worker processes
        result = runner.train()
    assert result.iterations == 2 and result.env_steps == 64
    assert seen[0][:2] == (torch.uint8, (16, 2, 4, 84, 84)) and seen[0][2] > 0
    assert result.eval_return is not None  # an evaluation game was played
    assert (tmp_path / "checkpoints" / "ckpt_000000000064.pt").exists()
