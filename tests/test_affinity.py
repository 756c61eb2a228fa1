"""The affinity plan: cores split between ranks, workers one per physical core first,
oversubscription always warned about, the plan printed, saved and applied."""

import dataclasses
import json
import subprocess
import sys
import time

import psutil
import pytest
import torch

from rlfw.launch.affinity import Machine, apply_affinity, busy_machine_warning, plan_affinity

# 4 physical cores with 2 hyperthreads each: siblings (0, 4), (1, 5), (2, 6), (3, 7)
SMT = Machine(
    usable=tuple(range(8)),
    physical=((0, 4), (1, 5), (2, 6), (3, 7)),
    logical_count=8,
    physical_count=4,
    gpus=2,
)


def test_two_ranks_split_the_physical_cores_and_workers_avoid_siblings():
    plan = plan_affinity(n_workers=2, local_world_size=2, use_gpus=True, machine=SMT)
    r0, r1 = plan.ranks
    assert r0.cores == [0, 1, 4, 5] and r1.cores == [2, 3, 6, 7]
    assert r0.worker_cores == [0, 1] and r1.worker_cores == [2, 3]  # no two on one core
    assert r0.torch_threads == r1.torch_threads == 2
    assert (r0.gpu, r1.gpu) == (0, 1)
    assert plan.warnings == []


def test_hyperthreads_are_used_only_after_every_physical_core():
    plan = plan_affinity(n_workers=6, local_world_size=1, machine=SMT)
    assert plan.ranks[0].worker_cores == [0, 1, 2, 3, 4, 5]
    assert plan.warnings == []


@pytest.mark.parametrize("n_workers,ranks", [(5, 2), (9, 1), (1, 5)])
def test_more_workers_or_ranks_than_cores_is_never_silent(n_workers, ranks):
    plan = plan_affinity(n_workers=n_workers, local_world_size=ranks, machine=SMT)
    per_rank_cores = [len(r.cores) for r in plan.ranks]
    oversubscribed = any(n_workers > c for c in per_rank_cores) or ranks > 4
    assert oversubscribed
    assert plan.warnings
    assert all(len(r.worker_cores) == n_workers for r in plan.ranks)
    assert "warning:" in plan.describe()
    for r in plan.ranks:  # every assignment is a usable core
        assert set(r.worker_cores) <= set(SMT.usable) and set(r.cores) <= set(SMT.usable)


def test_learner_threads_beyond_the_idle_cores_of_a_busy_machine_are_warned_about():
    two_cores = Machine(
        usable=(0, 1), physical=((0,), (1,)), logical_count=2, physical_count=2, gpus=0, busy=1.0
    )  # another run holds one core
    warning = busy_machine_warning(two_cores, learner_threads=2)
    assert "1 other thread(s) running on 2 usable cores" in warning
    assert "2 torch threads" in warning and "--set torch_threads=1" in warning
    assert busy_machine_warning(two_cores, learner_threads=1) is None
    assert busy_machine_warning(dataclasses.replace(two_cores, busy=0.0), 2) is None
    assert busy_machine_warning(dataclasses.replace(SMT, busy=2.0), 4) is None  # 6 idle


def test_a_process_spinning_beside_this_one_is_seen_as_busy():
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # past the interpreter's start
        assert Machine.detect().busy >= 1
    finally:
        spinner.kill()
        spinner.wait()


def test_plan_fits_this_machine_without_warnings():
    machine = Machine.detect()
    assert machine.usable == tuple(sorted(psutil.Process().cpu_affinity()))
    plan = plan_affinity(n_workers=len(machine.usable), machine=machine)
    assert plan.warnings == []
    assert sorted(plan.ranks[0].worker_cores) == list(machine.usable)
    assert plan_affinity(n_workers=len(machine.usable) + 1, machine=machine).warnings


def test_bad_plan_request_is_a_clear_error():
    with pytest.raises(ValueError, match="local_world_size >= 1 and n_workers >= 0, got 0"):
        plan_affinity(n_workers=1, local_world_size=0, machine=SMT)


def test_apply_sets_threads_and_pins(monkeypatch):
    before_threads = torch.get_num_threads()
    before_cores = psutil.Process().cpu_affinity()
    plan = plan_affinity(n_workers=1, machine=Machine.detect())
    share = plan.ranks[0]
    try:
        share.cores = [before_cores[0]]
        share.torch_threads = 1
        apply_affinity(share, pin=True)
        assert torch.get_num_threads() == 1
        assert psutil.Process().cpu_affinity() == [before_cores[0]]
    finally:
        psutil.Process().cpu_affinity(before_cores)
        torch.set_num_threads(before_threads)


@pytest.mark.integration
def test_train_prints_saves_and_pins_by_the_plan(tmp_path, capsys):
    from rlfw.cli import main

    before_cores = psutil.Process().cpu_affinity()
    run = tmp_path / "run"
    try:
        code = main(
            [
                "train",
                "--sampler",
                "cpu",
                "--n-workers",
                "3",
                "--pin-cpus",
                "--steps",
                "512",
                "--eval-every",
                "512",
                "--eval-episodes",
                "1",
                "--no-progress",
                "--log-dir",
                str(run),
            ]
        )
    finally:
        psutil.Process().cpu_affinity(before_cores)
    assert code == 0
    out = capsys.readouterr().out
    assert "rlfw: affinity:" in out and "3 sampler worker(s) each" in out
    saved = json.loads((run / "affinity.json").read_text())
    assert saved["n_workers"] == 3 and len(saved["ranks"][0]["worker_cores"]) == 3
    if len(before_cores) < 3:  # this machine: 3 workers cannot each have a core
        assert "more workers than cores" in out and saved["warnings"]


def test_learner_threads_follow_the_network_and_the_config_never_the_load():
    from rlfw.launch.affinity import SMALL_NETWORK_PARAMS, learner_threads

    small = torch.nn.Linear(10, 10)
    big = torch.nn.Linear(SMALL_NETWORK_PARAMS, 1)
    assert learner_threads(small, planned=2) == 1
    assert learner_threads(big, planned=2) == 2
    assert learner_threads(small, planned=2, chosen=3) == 3
    assert learner_threads(None, planned=2) == 2  # an agent without a model: the caller's


@pytest.mark.parametrize("chosen, expected", [(None, 1), (2, 2)])
def test_a_run_builds_its_network_under_its_own_thread_count(chosen, expected):
    """A CartPole network is small: its run takes one torch thread whatever the process
    had, and builds the same weights as a run started with one thread; torch_threads
    overrides."""
    from rlfw.launch.build import build_runner
    from rlfw.launch.config import RunConfig

    before = torch.get_num_threads()
    weights = []
    try:
        for start in (1, 2):
            torch.set_num_threads(start)
            config = RunConfig.for_env("CartPole-v1", "ppo", steps=256, torch_threads=chosen)
            with build_runner(config, None, progress=False, stdout=False) as runner:
                assert torch.get_num_threads() == expected
                weights.append({k: v.clone() for k, v in runner.agent.state_dict().items()})
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_torch_threads_must_be_positive():
    from rlfw.launch.config import RunConfig

    with pytest.raises(ValueError, match="torch_threads"):
        RunConfig.for_env("CartPole-v1", "ppo", torch_threads=0).validate()
