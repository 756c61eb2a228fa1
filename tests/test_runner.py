"""Sync runner: run folder contents, checkpoints, bitwise resume, Ctrl-C."""

import csv
import errno
import glob
import json
import os
import subprocess
import sys

import pytest
import torch

from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.runfolder.checkpoint import (
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)
from rlfw.runners import RunSchedule

from conftest import bits


def small_config(algo="ppo", itrs=6, seed=0, sampler="serial", env="CartPole-v1") -> RunConfig:
    config = apply_overrides(
        RunConfig(algo=algo, env=env, seed=seed, sampler=sampler, n_workers=2), preset(algo, env)
    )
    if env != "CartPole-v1":  # the many-agent preset's 100 steps: a test's 32
        config.batch_T = 32
    per_itr = config.batch_B * config.batch_T
    config.schedule = RunSchedule(
        n_steps=itrs * per_itr,
        eval_every=2 * per_itr,
        eval_episodes=2,
        log_every=per_itr,
        checkpoint_every=3 * per_itr,
        keep_checkpoints=2,
    )
    return config


def snapshot(runner) -> dict:
    out = dict(runner.agent.state_dict())
    for i, s in runner.algo.optimizer.state_dict()["state"].items():
        out.update({f"opt{i}/{k}": v for k, v in s.items() if isinstance(v, torch.Tensor)})
    return out


def test_run_folder_has_config_csv_tensorboard_checkpoint_and_plot(tmp_path):
    run = tmp_path / "run"
    result = build_runner(small_config(), str(run), progress=False, stdout=False).train()
    assert result.env_steps == 6 * 256 and not result.interrupted
    config = json.loads((run / "config.json").read_text())
    assert config["algo"] == "ppo" and config["env"] == "CartPole-v1"
    assert json.loads(json.dumps(RunConfig.from_dict(config).to_dict())) == config
    header = (run / "progress.csv").read_text().splitlines()[0].split(",")
    for key in (
        "step",
        "eval/return_mean",
        "rollout/return_mean",
        "train/policy_loss",
        "time/sample",
        "time/learn",
        "time/steps_per_second",
    ):
        assert key in header
    assert glob.glob(str(run / "events.out.tfevents.*"))
    assert (run / "learning_curve.png").stat().st_size > 1000
    assert [os.path.basename(p) for p in list_checkpoints(str(run))] == [
        "ckpt_000000000768.pt",
        "ckpt_000000001536.pt",
    ]


@pytest.mark.integration
def test_the_learning_curve_leaves_the_caller_s_matplotlib_alone(tmp_path):
    """A notebook's backend stays its own and no pyplot figure is left open: the curve is
    drawn on a figure of its own, without pyplot."""
    csv_path, png = tmp_path / "progress.csv", tmp_path / "curve.png"
    csv_path.write_text("step,rollout/return_mean,eval/return_mean\n100,1.5,\n200,2.5,3.0\n")
    script = (
        "import sys, matplotlib; matplotlib.use('svg'); "
        "from rlfw.logging.plot import plot_learning_curve; "
        f"written = plot_learning_curve({str(csv_path)!r}, {str(png)!r}); "
        "print(written is not None, matplotlib.get_backend(), "
        "'matplotlib.pyplot' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "svg", "False"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_evaluation_has_its_own_row_even_between_log_rows(tmp_path):
    """Rows every 4 iterations, evaluations every 3 and at the end (iteration 7): the
    evaluations at 3, 6 and 7 each land in a row at their own step with their own score,
    never averaged with another (6 and 7 fall between the same two log rows)."""
    config = small_config(itrs=7)
    per_itr = config.batch_B * config.batch_T
    config.schedule.eval_every, config.schedule.log_every = 3 * per_itr, 4 * per_itr
    run = tmp_path / "run"
    result = build_runner(config, str(run), progress=False, stdout=False).train()
    assert [step for step, _ in result.eval_history] == [3 * per_itr, 6 * per_itr, 7 * per_itr]
    with open(run / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == [k * per_itr for k in (3, 4, 6, 7)]
    logged = [
        (int(r["step"]), float(r["eval/return_mean"]))
        for r in rows
        if r["eval/return_mean"] not in ("", "nan")
    ]
    assert logged == result.eval_history


@pytest.mark.parametrize(
    "sampler,algo,env",
    [
        ("serial", "ppo", "CartPole-v1"),
        ("cpu", "ppo", "CartPole-v1"),
        ("alternating", "ppo", "CartPole-v1"),
        ("serial", "appo", "CartPole-v1"),
        ("cpu", "impala", "CartPole-v1"),
        ("cpu", "mappo", "mpe2.simple_spread_v3"),  # 3 agents a env: 3 columns each
    ],
)
def test_checkpoint_and_resume_is_bitwise_identical_to_one_run(
    tmp_path, monkeypatch, sampler, algo, env
):
    from conftest import children

    whole = build_runner(
        small_config(algo=algo, sampler=sampler, env=env),
        str(tmp_path / "whole"),
        progress=False,
        stdout=False,
    )
    with whole:
        whole.train()

    part = build_runner(
        small_config(algo=algo, sampler=sampler, env=env),
        str(tmp_path / "part"),
        progress=False,
        stdout=False,
    )
    real = type(part.sampler).obtain_samples

    def interrupt_at_4(self, itr):
        if itr == 4:
            raise KeyboardInterrupt  # Ctrl-C in the middle of iteration 4
        return real(self, itr)

    monkeypatch.setattr(type(part.sampler), "obtain_samples", interrupt_at_4)
    with part:
        result = part.train()
    assert result.interrupted and result.iterations == 4
    per_itr = whole.sampler.batch_B * whole.sampler.batch_T
    assert latest_checkpoint(str(tmp_path / "part")).endswith(f"ckpt_{3 * per_itr:012d}.pt")
    monkeypatch.setattr(type(part.sampler), "obtain_samples", real)

    resumed = build_runner(
        small_config(algo=algo, sampler=sampler, env=env),
        str(tmp_path / "part"),
        resume=True,
        progress=False,
        stdout=False,
    )
    with resumed:
        final = resumed.train()
    assert final.env_steps == 6 * per_itr
    a, b = snapshot(whole), snapshot(resumed)
    assert a.keys() == b.keys()
    assert children() == []  # `with runner:` closed every sampler
    assert all(torch.equal(bits(a[k]), bits(b[k])) for k in a), "resumed run diverged"
    assert final.eval_history[-1] == pytest.approx(build_history_tail(tmp_path / "whole"))


def build_history_tail(run_dir):
    state = load_checkpoint(latest_checkpoint(str(run_dir)))
    return state["result"]["eval_history"][-1]


def test_resume_without_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint in"):
        build_runner(small_config(), str(tmp_path), resume=True)


def test_a_run_folder_with_checkpoints_is_never_overwritten(tmp_path):
    build_runner(small_config(itrs=1), str(tmp_path), progress=False, stdout=False).train()
    with pytest.raises(ValueError, match=r"already holds a run \(.*checkpoints\)"):
        build_runner(small_config(itrs=1), str(tmp_path), progress=False, stdout=False)


def test_checkpoints_are_atomic_and_only_newest_kept(tmp_path, monkeypatch):
    for step in (10, 20, 30, 40):
        save_checkpoint(str(tmp_path), step, {"step": step}, keep=2)
    names = sorted(os.listdir(tmp_path / "checkpoints"))
    assert names == ["ckpt_000000000030.pt", "ckpt_000000000040.pt"]  # no temp files left

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("boom")

    with pytest.raises(TypeError, match="'state.bad' is a Unpicklable"):
        save_checkpoint(str(tmp_path), 50, {"bad": Unpicklable()}, keep=2)
    assert sorted(os.listdir(tmp_path / "checkpoints")) == names  # nothing written

    def disk_fills(obj, f):
        f.write(b"half a checkpoint")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_fills)
    with pytest.raises(OSError, match="No space left"):
        save_checkpoint(str(tmp_path), 50, {"step": 50}, keep=2)
    assert sorted(os.listdir(tmp_path / "checkpoints")) == names  # nothing half-written


def test_stop_at_return_ends_the_run_early(tmp_path):
    config = small_config(itrs=20)
    config.schedule.stop_at_return = 0.0  # any evaluation reaches it
    result = build_runner(config, str(tmp_path), progress=False, stdout=False).train()
    assert result.iterations == 2 and result.env_steps == 512
    assert latest_checkpoint(str(tmp_path)).endswith("ckpt_000000000512.pt")


def test_the_caller_owns_the_sampler_so_it_evaluates_after_train(tmp_path):
    runner = build_runner(small_config(itrs=2), str(tmp_path), progress=False, stdout=False)
    with runner.sampler:
        runner.train()
        episodes = runner.sampler.evaluate(2)  # still open after train()
        assert len(episodes) == 2
    with pytest.raises(RuntimeError, match="must be called first .it was closed."):
        runner.sampler.obtain_samples(0)


def test_max_restarts_needs_a_run_folder():
    with pytest.raises(ValueError, match="max_restarts needs a log_dir"):
        config = small_config()
        config.schedule.max_restarts = 1
        build_runner(config, None)


def test_config_json_round_trips_and_old_keys_still_load():
    config = small_config()
    assert RunConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    old = json.loads(json.dumps(config.to_dict()))
    old["n_envs"] = old.pop("batch_B")
    old["schedule"]["evaluate"] = True
    assert RunConfig.from_dict(old) == config
    with pytest.raises(ValueError, match="unknown config key 'bogus'"):
        RunConfig.from_dict({"bogus": 1})
