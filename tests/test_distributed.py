"""Multi-rank training on torch.distributed (gloo), launched by torchrun as a user would:
replicas stay bitwise identical, gradients are averaged, ranks sample different
experience, resume is bitwise, a dead rank stops the job naming it."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from rlfw.runfolder.checkpoint import load_checkpoint

from conftest import children

PROBE = str(Path(__file__).with_name("dist_probe.py"))


@pytest.fixture(autouse=True)
def temp_dir_in_tmp_path(tmp_path, monkeypatch):
    """The launches' temp dir (TMPDIR) in the test's folder: torchrun makes a log folder
    tree there per launch and never removes it."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))


def torchrun(*args: str, nproc: int = 2) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        *args,
    ]


def run(cmd: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(Path(__file__).parent),
    )


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
@pytest.mark.integration
def test_two_ranks_stay_identical_and_apply_the_mean_gradient(algo, tmp_path):
    """Every update applies exactly the mean of the ranks' gradients, so two ranks learn
    as one learner on their joint batch does (whose learning the single-process checks
    test); learning to a threshold over ranks is the scaling study's rank part
    (experiments/scaling/study.py: 1 and 2 ranks to 475 on CartPole at its small size)."""
    done = run(torchrun(PROBE, str(tmp_path), algo, "3"))
    assert done.returncode == 0, done.stderr[-3000:]
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert r0["world_size"] == r1["world_size"] == 2
    assert r0["iterations"] == r1["iterations"] == 3
    assert r0["env_steps"] == 3 * 2 * 2 * 16  # counted over both ranks
    assert len(r0["params"]) == len(r1["params"]) == 3
    for p0, p1 in zip(r0["params"], r1["params"]):  # after each of the 3 updates
        assert torch.equal(p0, p1)
    assert r0["params"][0].ne(r0["params"][-1]).any()  # they did learn
    steps = len(r0["local"])
    assert steps == len(r1["local"]) and steps >= 3
    for l0, l1, a0, a1 in zip(r0["local"], r1["local"], r0["applied"], r1["applied"]):
        assert torch.equal(a0, a1)
        assert torch.equal(a0, (l0 + l1) / 2)  # exact for two ranks
    assert any(not torch.equal(l0, l1) for l0, l1 in zip(r0["local"], r1["local"]))
    assert r0["seed"] == 0 and r1["seed"] != r0["seed"]  # rank 0 keeps the run seed
    assert not torch.equal(r0["first_obs"], r1["first_obs"])  # no duplicated experience


@pytest.mark.integration
def test_leaving_the_group_stops_its_threads(tmp_path):
    """After ``close`` no gloo thread is left: one alive during interpreter shutdown can
    free a finished collective's tensors there, needs the GIL for it, and aborts the rank
    ("terminate called without an active exception"). torch.optim loads torch._dynamo, whose
    torch.distributed.nn keeps the group alive if first imported after the group exists."""
    done = run(torchrun(PROBE, str(tmp_path), "ppo", "1"))
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in (0, 1):
        names = json.loads((tmp_path / f"rank{rank}.threads.json").read_text())
        assert not [n for n in names if "gloo" in n], (rank, names)


# Schedules that do not depend on the run length, so a 512-step run is the first half of
# the 1,024-step one (its checkpoint at 512 is the one an interrupted run would leave).
@pytest.mark.integration
def test_normalization_statistics_are_the_same_on_every_rank(tmp_path):
    """PPO on Pendulum with observations normalized and rewards scaled: every rank adds
    every rank's batch, so the statistics stay as identical as the weights."""
    done = run(torchrun(PROBE, str(tmp_path), "ppo-pendulum", "3"))
    assert done.returncode == 0, done.stderr[-3000:]
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert "normalizer.stats.mean" in r0["agent"]
    assert r0["agent"]["normalizer.stats.count"].item() > 3 * 2 * 2 * 16 - 1  # both ranks'
    for key in r0["agent"]:
        assert torch.equal(r0["agent"][key], r1["agent"][key]), key
    assert not torch.equal(r0["first_obs"], r1["first_obs"])


FAST = [
    "--steps",
    "1024",
    "--batch-B",
    "2",
    "--eval-every",
    "512",
    "--eval-episodes",
    "2",
    "--checkpoint-every",
    "512",
    "--no-progress",
    "--set",
    "ppo.minibatch_size=64",
    "--set",
    "ppo.anneal_lr=false",
    "--set",
    "ppo.anneal_clip=false",
]


def _final_agent(run_dir: Path) -> dict:
    newest = sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))[-1]
    return load_checkpoint(str(newest))


@pytest.mark.integration
def test_resume_with_the_same_world_size_is_bitwise_and_another_is_refused(tmp_path):
    whole, part = tmp_path / "whole", tmp_path / "part"
    done = run(torchrun("-m", "rlfw", "train", "--log-dir", str(whole), *FAST))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 ranks x 2 envs x 32 steps = global batch 128 (gloo)" in done.stdout
    first_half = [a if a != "1024" else "512" for a in FAST]
    done = run(torchrun("-m", "rlfw", "train", "--log-dir", str(part), *first_half))
    assert done.returncode == 0, done.stderr[-3000:]
    done = run(
        torchrun("-m", "rlfw", "train", "--resume", str(part), "--steps", "1024", "--no-progress")
    )
    assert done.returncode == 0, done.stderr[-3000:]
    a, b = _final_agent(whole), _final_agent(part)
    assert a["itr"] == b["itr"] == 8 and len(a["ranks"]) == len(b["ranks"]) == 1
    for key in a["agent"]:
        assert torch.equal(a["agent"][key], b["agent"][key]), key
    assert torch.equal(a["ranks"][0]["rng"]["torch"], b["ranks"][0]["rng"]["torch"])

    alone = run(
        [
            sys.executable,
            "-m",
            "rlfw",
            "train",
            "--resume",
            str(part),
            "--steps",
            "2048",
            "--no-progress",
        ]
    )
    assert alone.returncode == 2
    assert "was trained with world_size 2 and this launch has 1 rank(s)" in alone.stderr


@pytest.mark.integration
def test_a_rank_that_dies_stops_the_job_naming_it(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    job = subprocess.Popen(
        torchrun(
            "-m",
            "rlfw",
            "train",
            "--log-dir",
            str(tmp_path / "run"),
            "--steps",
            "10000000",
            "--eval-every",
            "1000000",
            "--no-progress",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        victim = None
        while victim is None and time.monotonic() < deadline:
            for proc in psutil.Process(job.pid).children(recursive=True):
                try:
                    if proc.environ().get("RANK") == "1" and "rlfw" in proc.cmdline():
                        victim = proc
                except psutil.NoSuchProcess:
                    pass
            time.sleep(0.2)
        assert victim is not None, "rank 1 never started"
        time.sleep(4)  # well into training
        victim.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        out, _ = job.communicate(timeout=60)
        stopped_in = time.monotonic() - killed
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode != 0
    assert stopped_in < 30
    assert re.search(r"rank\s*:\s*1 \(local_rank: 1\)\s+exitcode\s*:\s*-9", out), out[-3000:]
    assert "Signal 9 (SIGKILL)" in out
    assert not children()  # torchrun took the other rank and every sampler worker down


@pytest.mark.integration
def test_the_distributed_script_runs_under_torchrun(tmp_path):
    script = str(Path(__file__).parents[1] / "experiments" / "distributed.py")
    done = run(torchrun(script, "--steps", "2048", "--log-dir", str(tmp_path / "run")))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("last eval return") == 1  # rank 0 alone reports
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["world_size"] == 2 and saved["batch_B"] == 4  # the preset's 8 split in two


@pytest.mark.integration
def test_torchrun_max_restarts_resumes_from_the_newest_checkpoint(tmp_path):
    """torchrun's elastic restart relaunches every rank with the same command; with a fixed
    --log-dir the relaunched ranks continue from the folder's newest checkpoint."""
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "--max-restarts=1",
        "-m",
        "rlfw",
        "train",
        "--log-dir",
        str(run_dir),
        "--steps",
        "40960",
        "--checkpoint-every",
        "2048",
        "--eval-every",
        "40960",
        "--eval-episodes",
        "2",
        "--no-progress",
    ]
    job = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    try:
        deadline = time.monotonic() + 90
        while (
            not list((run_dir / "checkpoints").glob("ckpt_*.pt"))
            if (run_dir / "checkpoints").exists()
            else True
        ):
            assert time.monotonic() < deadline and job.poll() is None, "no checkpoint"
            time.sleep(0.1)
        for proc in psutil.Process(job.pid).children(recursive=True):
            try:
                if proc.environ().get("RANK") == "1" and "rlfw" in proc.cmdline():
                    proc.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        out, _ = job.communicate(timeout=240)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode == 0, out[-3000:]
    assert "done after 40960 env steps" in out
    starts = [line for line in out.splitlines() if line.startswith("rlfw: ppo on CartPole-v1")]
    assert len(starts) == 2  # the first launch and the restarted one
    final = load_checkpoint(str(sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))[-1]))
    assert final["itr"] * 2 * 8 * 32 == 40960 and len(final["ranks"]) == 1
    assert not children()


@pytest.mark.integration
def test_recurrent_ranks_each_carry_their_own_states(tmp_path):
    """A GRU agent under torchrun: one set of weights, while each rank's sampler keeps the
    states of its own env slots (saved per rank, so a resumed rank gets its own back)."""
    done = run(
        torchrun(
            "-m",
            "rlfw",
            "train",
            "--log-dir",
            str(tmp_path / "run"),
            *FAST,
            "--set",
            "recurrent=gru",
            "--set",
            "rnn_size=8",
        )
    )
    assert done.returncode == 0, done.stderr[-3000:]
    newest = _final_agent(tmp_path / "run")
    assert "actor.core.rnn.weight_hh_l0" in newest["agent"]
    states = [
        newest["sampler"]["collector"]["agent_state"],
        newest["ranks"][0]["sampler"]["collector"]["agent_state"],
    ]
    assert all(s.shape == (2, 8) for s in states)
    assert not torch.equal(states[0], states[1])
