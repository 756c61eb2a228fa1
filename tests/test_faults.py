"""Faults survived, nothing lost: a worker killed at every moment, restart-after-kill equal to
an uninterrupted run, damaged checkpoints, non-finite numbers."""

import os
import signal
import textwrap
import time

import pytest
import torch

from rlfw import (
    PPO,
    ActorCriticAgent,
    AsyncRunner,
    ConcurrentRunner,
    EnvFactory,
    EnvSpaces,
    PPOConfig,
    RunSchedule,
    SyncRunner,
)
from rlfw.cli import main
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.runfolder.checkpoint import list_checkpoints, load_checkpoint
from rlfw.samplers import (
    ParallelCpuSampler,
    SerialSampler,
    WorkerError,
)
from rlfw.testing import CountingAgent, CountingEnv, KillOnceEnv, NonFiniteRewardEnv, SelfKillingEnv
from rlfw.utils.checks import NonFiniteError
from rlfw.utils.seeding import seed_everything

from conftest import bits, children, sampler_kinds, shm_entries

PARALLEL = sampler_kinds(with_workers=True)  # every registered kind with worker processes


def kill_worker(sampler, worker: int = 1) -> int:
    pid = sampler.pool.procs[worker].pid
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while sampler.pool.procs[worker].is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    return pid


def between_batches(sampler):
    sampler.obtain_samples(0)
    pid = kill_worker(sampler)
    return pid, lambda: sampler.obtain_samples(1)  # the master sends the next command


def during_evaluation(sampler):
    sampler.obtain_samples(0)
    pid = kill_worker(sampler)
    sampler.evaluate(2)  # evaluation runs on the master's eval envs and is unaffected

    return pid, lambda: sampler.obtain_samples(1)


def during_checkpointing(sampler):
    sampler.obtain_samples(0)
    pid = kill_worker(sampler)
    return pid, sampler.state_dict


def while_loading_a_checkpoint(sampler):
    state = sampler.state_dict()
    pid = kill_worker(sampler)
    return pid, lambda: sampler.load_state_dict(state)


MOMENTS = {
    "between_batches": between_batches,
    "during_evaluation": during_evaluation,
    "during_checkpointing": during_checkpointing,
    "while_loading_a_checkpoint": while_loading_a_checkpoint,
}


def assert_cleaned_up(sampler, shm_before):
    deadline = time.monotonic() + 5
    while children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children() == [], "worker processes left behind"
    sampler.close()
    assert shm_entries() <= shm_before, "shared memory leaked"


@pytest.mark.isolated
@pytest.mark.parametrize("kind", list(PARALLEL))
@pytest.mark.parametrize("moment", list(MOMENTS))
def test_worker_killed_at_any_moment_is_a_worker_error(kind, moment):
    shm_before = shm_entries()
    sampler = PARALLEL[kind](EnvFactory("counting", entry=CountingEnv), 8, 4, 0)
    sampler.initialize(CountingAgent())
    pid, next_command = MOMENTS[moment](sampler)
    start = time.monotonic()
    with pytest.raises(
        WorkerError,
        match=rf"sampler worker 1 \(pid {pid}\) died: killed by "
        "signal 9",
    ):
        next_command()
    assert time.monotonic() - start < 5.0
    assert_cleaned_up(sampler, shm_before)


@pytest.mark.isolated
@pytest.mark.parametrize("kind", list(PARALLEL))
def test_worker_killed_during_startup_is_a_worker_error(kind):
    shm_before = shm_entries()
    factory = EnvFactory("dies", entry=SelfKillingEnv, kwargs=(("kill_in_reset", True),))
    sampler = PARALLEL[kind](factory, 8, 4, 0)
    start = time.monotonic()
    with pytest.raises(WorkerError, match=r"sampler worker \d \(pid \d+\) died: killed by signal"):
        sampler.initialize(CountingAgent())
    assert time.monotonic() - start < 15.0  # includes spawning the interpreters
    assert_cleaned_up(sampler, shm_before)


def test_a_failed_sampler_can_be_initialized_again():
    sampler = ParallelCpuSampler(EnvFactory("counting", entry=CountingEnv), 4, 2, 0, n_workers=2)
    sampler.initialize(CountingAgent())
    kill_worker(sampler)
    with pytest.raises(WorkerError):
        sampler.obtain_samples(0)
    with pytest.raises(WorkerError, match="stopped"):
        sampler.obtain_samples(0)  # no pipe error from a closed pool either
    sampler.close()
    sampler.initialize(CountingAgent())
    assert sampler.obtain_samples(0)[0].reward.shape == (4, 2)
    sampler.close()
    assert children() == []


# -- restarts ---------------------------------------------------------------------------


def kill_once_runner(
    log_dir, marker, kind: str, max_restarts: int, runner_cls=SyncRunner
) -> SyncRunner:
    seed_everything(0)
    # Each env's 100th step lies in iteration 3 (32 steps per env per iteration); the
    # newest checkpoint before it is iteration 2's.
    factory = EnvFactory(
        "KillOnce", entry=KillOnceEnv, kwargs=(("kill_at", 100), ("marker", str(marker)))
    )
    agent = ActorCriticAgent.build(EnvSpaces.of(factory))
    sampler = PARALLEL[kind](factory, 32, 4, 3)
    algo = PPO(PPOConfig(learning_rate=1e-3, epochs=2, minibatch_size=64))
    schedule = RunSchedule(
        n_steps=6 * 128,
        eval_every=None,
        log_every=128,
        checkpoint_every=256,
        max_restarts=max_restarts,
    )
    return runner_cls(
        algo, agent, sampler, schedule, log_dir=str(log_dir), seed=3, progress=False, stdout=False
    )


@pytest.mark.parametrize("kind", list(PARALLEL))
def test_restart_after_a_killed_worker_equals_an_uninterrupted_run(tmp_path, kind):
    marker = tmp_path / "already-killed"
    marker.touch()  # the uninterrupted run: nobody dies
    with kill_once_runner(tmp_path / "whole", marker, kind, 0) as whole:
        whole_result = whole.train()
    marker.unlink()
    with kill_once_runner(tmp_path / "restarted", marker, kind, 1) as restarted:
        result = restarted.train()
    assert marker.exists(), "the worker was never killed"
    assert result.restarts == 1 and whole_result.restarts == 0
    assert result.env_steps == whole_result.env_steps == 6 * 128
    a, b = whole.agent.state_dict(), restarted.agent.state_dict()
    assert all(torch.equal(bits(a[k]), bits(b[k])) for k in a), "restarted run diverged"
    assert children() == []


def test_concurrent_restart_after_a_killed_worker_equals_an_uninterrupted_run(tmp_path):
    marker = tmp_path / "already-killed"
    marker.touch()
    with kill_once_runner(tmp_path / "whole", marker, "cpu", 0, ConcurrentRunner) as whole:
        whole.train()
    marker.unlink()
    with kill_once_runner(tmp_path / "restarted", marker, "cpu", 1, ConcurrentRunner) as restarted:
        result = restarted.train()
    assert marker.exists() and result.restarts == 1 and result.env_steps == 6 * 128
    a, b = whole.agent.state_dict(), restarted.agent.state_dict()
    assert all(torch.equal(bits(a[k]), bits(b[k])) for k in a), "restarted run diverged"
    assert children() == []


@pytest.mark.integration
def test_async_restart_after_a_killed_worker_continues_to_the_end(tmp_path):
    marker = tmp_path / "already-killed"
    with kill_once_runner(tmp_path / "run", marker, "cpu", 1, AsyncRunner) as runner:
        result = runner.train()
    assert marker.exists(), "the worker was never killed"
    assert result.restarts == 1 and result.env_steps == 6 * 128
    assert children() == []


def test_without_restarts_left_the_worker_error_propagates(tmp_path):
    with kill_once_runner(tmp_path / "run", tmp_path / "marker", "cpu", 0) as runner:
        with pytest.raises(WorkerError, match="killed by signal 9"):
            runner.train()
    assert children() == []


def test_cli_reports_a_dead_worker_in_one_line_with_the_resume_command(
    tmp_path, capsys, monkeypatch
):
    run = tmp_path / "run"
    real = ParallelCpuSampler._collect

    def die_in_iteration_3(self, itr):
        if itr == 3:
            kill_worker(self, 0)
        return real(self, itr)

    monkeypatch.setattr(ParallelCpuSampler, "_collect", die_in_iteration_3)
    code = main(
        [
            "train",
            "--algo",
            "a2c",
            "--sampler",
            "cpu",
            "--n-workers",
            "2",
            "--steps",
            "400",
            "--checkpoint-every",
            "80",
            "--no-progress",
            "--log-dir",
            str(run),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "rlfw: error: sampler worker 0 (pid" in err and "died: killed by signal 9" in err
    assert f"newest checkpoint {run}/checkpoints/ckpt_000000000080.pt" in err
    assert f"resume with: python -m rlfw train --resume {run}" in err
    assert "Traceback" not in err
    assert children() == []


# -- damaged checkpoints ----------------------------------------------------------------
def small_config(itrs: int) -> RunConfig:
    config = apply_overrides(RunConfig(algo="ppo", seed=0), preset("ppo", "CartPole-v1"))
    config.schedule = RunSchedule(
        n_steps=itrs * 256, eval_every=None, log_every=256, checkpoint_every=512, keep_checkpoints=3
    )
    return config


def test_a_truncated_newest_checkpoint_falls_back_to_the_previous_one(
    tmp_path, capsys, monkeypatch
):
    with build_runner(
        small_config(6), str(tmp_path / "whole"), progress=False, stdout=False
    ) as whole:
        whole.train()
    run = tmp_path / "part"
    with build_runner(small_config(6), str(run), progress=False, stdout=False) as part:
        real = type(part.sampler)._collect

        def interrupt_at_4(self, itr):
            if itr == 4:
                raise KeyboardInterrupt
            return real(self, itr)

        monkeypatch.setattr(type(part.sampler), "_collect", interrupt_at_4)
        assert part.train().interrupted
        monkeypatch.setattr(type(part.sampler), "_collect", real)
    assert list_checkpoints(str(run))[-1].endswith("ckpt_000000001024.pt")
    newest = list_checkpoints(str(run))[-1]
    with open(newest, "r+b") as f:  # a full disk: the file stops half-way
        f.truncate(os.path.getsize(newest) // 2)
    with build_runner(small_config(6), str(run), resume=True, progress=False) as resumed:
        result = resumed.train()
    out = capsys.readouterr().out
    assert f"skipped damaged checkpoint {newest}" in out
    assert result.env_steps == 6 * 256
    a, b = whole.agent.state_dict(), resumed.agent.state_dict()
    assert all(torch.equal(bits(a[k]), bits(b[k])) for k in a)


def test_no_loadable_checkpoint_is_an_error_naming_the_folder(tmp_path, capsys):
    run = tmp_path / "run"
    assert (
        main(["train", "--algo", "a2c", "--steps", "80", "--no-progress", "--log-dir", str(run)])
        == 0
    )
    for path in list_checkpoints(str(run)):
        with open(path, "wb") as f:
            f.write(b"garbage")
    with pytest.raises(SystemExit) as exc:
        main(["train", "--resume", str(run), "--no-progress"])
    err = capsys.readouterr().err
    assert exc.value.code == 1
    assert f"no checkpoint in '{run}/checkpoints' loads" in err and "ckpt_000000000080.pt" in err


# -- non-finite numbers -----------------------------------------------------------------
def test_nan_reward_names_the_env_slot_and_step():
    factory = EnvFactory("nan-reward", entry=NonFiniteRewardEnv, kwargs=(("nan_at", 6),))
    with SerialSampler(factory, 4, 3, seed=0) as sampler:
        sampler.initialize(CountingAgent())
        sampler.obtain_samples(0)
        with pytest.raises(
            NonFiniteError,
            match="env 'nan-reward' slot 0 emitted a non-finite reward at step 2 of batch 1",
        ):
            sampler.obtain_samples(1)


def test_nan_loss_stops_before_the_update_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    config = small_config(6)
    config.schedule.checkpoint_every = 256
    runner = build_runner(config, str(tmp_path), progress=False, stdout=False)
    real = ActorCriticAgent.evaluate_params  # what every PPO loss evaluates through
    poisoned = {"on": False}

    def evaluate_params(self, obs, *sequence):
        params, value = real(self, obs, *sequence)
        return params, value * float("nan") if poisoned["on"] else value

    real_collect = type(runner.sampler)._collect

    def collect(self, itr):
        poisoned["on"] = itr == 2
        return real_collect(self, itr)

    monkeypatch.setattr(ActorCriticAgent, "evaluate_params", evaluate_params)
    monkeypatch.setattr(type(runner.sampler), "_collect", collect)
    with runner, pytest.raises(NonFiniteError, match="iteration 2: non-finite loss"):
        runner.train()
    newest = list_checkpoints(str(tmp_path))[-1]
    assert newest.endswith("ckpt_000000000512.pt")  # iterations 0 and 1, nothing after
    saved = load_checkpoint(newest)["agent"]
    now = runner.agent.state_dict()
    assert all(torch.equal(bits(saved[k]), bits(now[k])) for k in saved), (
        "the non-finite update was applied"
    )


# A master that keeps sampling until it is killed; prints the pids of everything it started.
MASTER = textwrap.dedent("""
    import sys, time
    import psutil
    from rlfw.envs import EnvFactory
    from rlfw.registry import SAMPLERS
    from rlfw.samplers.async_ import SamplerProcess
    from rlfw.testing import CountingAgent, CountingEnv

    if __name__ == "__main__":
        sys.path.insert(0, sys.argv[2])  # the suite's plugin samplers
        for module in sys.argv[3:]:
            __import__(module)
        kind = sys.argv[1].removeprefix("async-")
        sampler = SAMPLERS.get(kind).build(EnvFactory("counting", entry=CountingEnv), 8, 4,
                                           n_workers=2)
        agent = CountingAgent()
        if sys.argv[1].startswith("async-"):  # its own process runs the sampler's workers
            sampler = SamplerProcess(sampler, lead=2)
            sampler.initialize(agent)
            sampler.begin(agent, 0)
        else:
            sampler.initialize(agent)
        sampler.obtain_samples(0)
        time.sleep(0.5)  # the async process now runs ahead, then waits for credit
        descendants = psutil.Process().children(recursive=True)
        print(" ".join(str(p.pid) for p in descendants), flush=True)
        itr = 1
        while True:
            if not sys.argv[1].startswith("async-"):
                sampler.obtain_samples(itr)
                itr += 1
""")


@pytest.mark.parametrize("kind", [*PARALLEL, "async-cpu"])
@pytest.mark.integration
def test_a_killed_master_leaves_no_process_behind(kind, tmp_path):
    """Workers (forked by a forkserver, so not the master's children) and the forkserver
    itself exit within seconds of the master's SIGKILL, whatever the workers were doing."""
    import select
    import subprocess
    import sys

    import psutil

    from conftest import PLUGIN_MODULES, PLUGINS

    # A SIGKILLed process cannot remove its multiprocessing temp folder (the forkserver's
    # socket): it goes in this test's folder, not the machine's /tmp.
    master = subprocess.Popen(
        [sys.executable, "-c", MASTER, kind, str(PLUGINS), *PLUGIN_MODULES],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    try:
        assert select.select([master.stdout], [], [], 60)[0], "the master never started"
        pids = [int(p) for p in master.stdout.readline().split()]
        # Taken while the master lives: the forkserver and the resource tracker may be gone
        # within milliseconds of its death (as they should), before a later look finds them.
        started = []
        for pid in pids:
            try:
                started.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                pass  # a short-lived helper of the master's, already done
    finally:
        master.kill()
        master.wait(timeout=10)
    assert len(started) >= 3  # the workers, the forkserver, the resource tracker
    gone, alive = psutil.wait_procs(started, timeout=10)
    for p in alive:
        p.kill()
    assert not alive, [(p.pid, p.cmdline()) for p in alive]
