"""Concurrent (HTS-RL) runner: lag exactly one, bitwise determinism, resume after Ctrl-C."""

import pytest
import torch
from test_runner import small_config, snapshot

from rlfw.launch.build import build_runner
from rlfw.runfolder.checkpoint import latest_checkpoint, load_checkpoint

from conftest import bits, children


def concurrent_config(sampler="serial", itrs=6, seed=0):
    config = small_config(sampler=sampler, itrs=itrs, seed=seed)
    config.runner = "concurrent"
    return config


def run(config, log_dir, record=None):
    runner = build_runner(config, str(log_dir), progress=False, stdout=False)
    if record is not None:
        real = runner.algo.optimize

        def optimize(samples, itr):
            record.append((itr, samples.policy_version.clone()))
            return real(samples, itr)

        runner.algo.optimize = optimize
    with runner:
        result = runner.train()
    return runner, result


def same_params(a, b) -> bool:
    sa, sb = snapshot(a), snapshot(b)
    return sa.keys() == sb.keys() and all(torch.equal(bits(sa[k]), bits(sb[k])) for k in sa)


def test_every_sample_of_batch_itr_was_drawn_with_policy_version_itr_minus_one(tmp_path):
    seen = []
    runner, result = run(concurrent_config(itrs=5), tmp_path / "run", seen)
    assert [itr for itr, _ in seen] == [0, 1, 2, 3, 4]
    config = runner.config
    for itr, versions in seen:
        assert versions.shape == (config["batch_T"], config["batch_B"])
        # batch 0 is drawn with the initial weights (nothing to overlap it with)
        assert torch.all(versions == max(itr - 1, 0)), (itr, versions.unique())
    assert result.env_steps == 5 * 256


@pytest.mark.parametrize("sampler", ["serial", "cpu"])
@pytest.mark.integration
def test_two_runs_with_the_same_seed_end_bitwise_identical(tmp_path, sampler):
    first, _ = run(concurrent_config(sampler), tmp_path / "a")
    second, _ = run(concurrent_config(sampler), tmp_path / "b")
    assert same_params(first, second)
    # ... and the lag is real: the sync runner (lag 0) ends elsewhere
    sync = small_config(sampler=sampler)
    synced, _ = run(sync, tmp_path / "sync")
    assert not same_params(first, synced)


@pytest.mark.parametrize("sampler", ["serial", "cpu"])
@pytest.mark.integration
def test_ctrl_c_then_resume_equals_an_uninterrupted_run(tmp_path, monkeypatch, sampler):
    whole, whole_result = run(concurrent_config(sampler), tmp_path / "whole")

    part = build_runner(
        concurrent_config(sampler), str(tmp_path / "part"), progress=False, stdout=False
    )
    real = part.algo.optimize

    def interrupt_at_4(samples, itr):
        if itr == 4:
            raise KeyboardInterrupt  # Ctrl-C while batch 5 is being sampled
        return real(samples, itr)

    part.algo.optimize = interrupt_at_4
    with part:
        result = part.train()
    assert result.interrupted and result.iterations == 4
    assert latest_checkpoint(str(tmp_path / "part")).endswith("ckpt_000000000768.pt")
    state = load_checkpoint(latest_checkpoint(str(tmp_path / "part")))
    assert torch.all(state["pending"].policy_version == 2)  # batch 3 in hand, drawn with θ_2

    resumed = build_runner(
        concurrent_config(sampler),
        str(tmp_path / "part"),
        resume=True,
        progress=False,
        stdout=False,
    )
    with resumed:
        final = resumed.train()
    assert final.env_steps == 6 * 256
    assert same_params(whole, resumed), "resumed concurrent run diverged"
    assert final.eval_history[-1] == whole_result.eval_history[-1]
    assert children() == []


@pytest.mark.parametrize("algo", ["dqn", "r2d1"])
def test_replay_algorithms_keep_the_lag_at_one_repeat_bitwise_and_resume_bitwise(
    tmp_path, monkeypatch, algo
):
    """DQN (and R2D1, whose replay also keeps the sampler's recurrent state) under the
    concurrent runner: batch k drawn with θ_{k-1}, the same run twice bit for bit, and a
    run stopped by Ctrl-C and resumed (replay in its checkpoint) equal to the whole one."""

    def config():
        out = concurrent_config(itrs=6)
        out.algo = algo
        out.batch_B, out.batch_T = 2, 32
        own = out.algo_config()
        own.learning_starts, own.save_replay, own.replay_capacity = 64, True, 1024
        if algo == "r2d1":  # few short sequences: an LSTM update costs ~100x DQN's here
            own.burn_in, own.learn_steps, own.period, own.n_step = 4, 8, 4, 2
            own.batch_size, own.replay_ratio, out.rnn_size = 8, 1 / 16, 16
        out.schedule.n_steps, out.schedule.checkpoint_every = 6 * 64, 3 * 64
        out.schedule.eval_every = None
        return out

    seen = []
    whole, _ = run(config(), tmp_path / "whole", seen)
    assert [itr for itr, _ in seen] == list(range(6))
    for itr, versions in seen:
        assert torch.all(versions == max(itr - 1, 0)), (itr, versions.unique())
    assert whole.algo.updates > 0
    again, _ = run(config(), tmp_path / "again")
    assert same_params(whole, again)

    part = build_runner(config(), str(tmp_path / "part"), progress=False, stdout=False)
    real = part.algo.optimize

    def interrupt_at_4(samples, itr):
        if itr == 4:
            raise KeyboardInterrupt
        return real(samples, itr)

    part.algo.optimize = interrupt_at_4
    with part:
        assert part.train().interrupted
    resumed = build_runner(
        config(), str(tmp_path / "part"), resume=True, progress=False, stdout=False
    )
    with resumed:
        resumed.train()
    assert same_params(whole, resumed), "resumed concurrent run diverged"


def test_a_worker_death_in_the_background_batch_surfaces_as_worker_error(tmp_path):
    from rlfw.samplers import WorkerError

    runner = build_runner(
        concurrent_config("cpu", itrs=4), str(tmp_path / "run"), progress=False, stdout=False
    )
    real = runner.algo.optimize

    def kill_worker_then_learn(samples, itr):
        if itr == 1:  # batch 2 is being sampled right now, in the background thread
            runner.sampler.pool.procs[0].kill()
        return real(samples, itr)

    runner.algo.optimize = kill_worker_then_learn
    with runner, pytest.raises(WorkerError, match="sampler worker 0 .* died"):
        runner.train()
    assert children() == []
