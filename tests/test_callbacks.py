"""Callbacks observe a run and may stop it: from a script (``build_runner(callbacks=)``) and
from the CLI (``--callback MODULE:NAME``), with bad specs refused in one line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlfw.cli import main
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig
from rlfw.runfolder.checkpoint import list_checkpoints
from rlfw.runners.callbacks import CallbackList

PLUGINS = Path(__file__).parent / "callback_plugins"


class Recorder:
    """Every hook, recording the order of calls; stops at ``stop_at`` iterations."""

    def __init__(self, stop_at=None):
        self.calls, self.stop_at = [], stop_at

    def on_start(self, runner):
        self.calls.append(("start", runner.start_itr))

    def on_iteration(self, metrics):
        self.calls.append(("iteration", metrics))
        if self.stop_at is not None and metrics["iteration"] >= self.stop_at:
            return False
        return None

    def on_eval(self, metrics):
        self.calls.append(("eval", metrics))

    def on_checkpoint(self, path, env_steps):
        self.calls.append(("checkpoint", path, env_steps))

    def on_end(self, result):
        self.calls.append(("end", result))


class OnlyEnd:
    def __init__(self):
        self.ended = 0

    def on_end(self, result):
        self.ended += 1


def _config(**kw):
    # 8 envs x 32 steps = 256 steps an iteration; 6 iterations, evaluation every 2
    return RunConfig.for_env(
        "CartPole-v1",
        "ppo",
        steps=6 * 256,
        n_eval_envs=2,
        schedule={"eval_every": 512, "eval_episodes": 2, "checkpoint_every": 512},
        **kw,
    )


def test_every_hook_is_called_in_order_with_the_run_s_numbers(tmp_path):
    recorder, only_end = Recorder(), OnlyEnd()
    with build_runner(
        _config(),
        str(tmp_path / "run"),
        progress=False,
        stdout=False,
        callbacks=[recorder, only_end],
    ) as runner:
        result = runner.train()
    kinds = [c[0] for c in recorder.calls]
    assert kinds[0] == "start" and kinds[-1] == "end" and only_end.ended == 1
    iterations = [c[1] for c in recorder.calls if c[0] == "iteration"]
    assert [m["iteration"] for m in iterations] == [1, 2, 3, 4, 5, 6]
    assert [m["env_steps"] for m in iterations] == [256 * k for k in range(1, 7)]
    assert all(any(k.startswith("train/") for k in m) for m in iterations)
    assert any("rollout/return_mean" in m for m in iterations)  # CartPole episodes end
    evals = [c[1] for c in recorder.calls if c[0] == "eval"]
    assert [e["env_steps"] for e in evals] == [512, 1024, 1536]
    assert [e["eval/return_mean"] for e in evals] == [r for _, r in result.eval_history]
    checkpoints = [c for c in recorder.calls if c[0] == "checkpoint"]
    assert [c[2] for c in checkpoints] == [512, 1024, 1536]
    assert checkpoints[-1][1] == list_checkpoints(str(tmp_path / "run"))[-1]
    # the eval of an iteration comes before its metrics, its checkpoint after
    assert kinds.index("eval") < kinds.index("checkpoint")
    assert recorder.calls[-1][1] is result and result.stopped_by is None


def test_on_iteration_false_stops_the_run_with_a_checkpoint_that_resumes(tmp_path):
    run = str(tmp_path / "run")
    recorder = Recorder(stop_at=3)
    with build_runner(_config(), run, progress=False, stdout=False, callbacks=[recorder]) as runner:
        result = runner.train()
    assert result.stopped_by == "Recorder" and result.env_steps == 3 * 256
    assert not result.interrupted
    assert os.path.basename(list_checkpoints(run)[-1]) == f"ckpt_{3 * 256:012d}.pt"
    # the run goes on from there as any stopped run: resume finishes it
    resumed = Recorder()
    with build_runner(
        RunConfig.load(run), run, resume=True, progress=False, stdout=False, callbacks=[resumed]
    ) as runner:
        result = runner.train()
    assert resumed.calls[0] == ("start", 3) and result.env_steps == 6 * 256


def test_a_callback_without_hooks_is_refused():
    with pytest.raises(ValueError, match="callback object has none of the hooks on_start"):
        CallbackList([object()])


@pytest.mark.integration
def test_callback_from_the_cli_stops_the_run(tmp_path):
    log = tmp_path / "seen.json"
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(PLUGINS), "RLFW_TEST_CALLBACK_LOG": str(log)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlfw",
            "train",
            "--steps",
            "2048",
            "--no-progress",
            "--log-dir",
            str(run),
            "--callback",
            "my_callbacks:StopAfterTwoIterations",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "stopped by callback StopAfterTwoIterations after 512 env steps" in done.stdout
    seen = json.loads(log.read_text())
    assert seen["start"] == 1 and len(seen["iterations"]) == 2
    assert seen["end"] == {"env_steps": 512, "stopped_by": "StopAfterTwoIterations"}
    assert seen["checkpoints"] == [[f"ckpt_{512:012d}.pt", 512]]


@pytest.mark.parametrize(
    "spec, message",
    [
        ("my_callbacks", "--callback my_callbacks: takes MODULE:NAME"),
        ("no_such_module_xyz:Thing", "cannot import module 'no_such_module_xyz'"),
        ("my_callbacks:Missing", "module 'my_callbacks' has no class 'Missing'"),
        ("my_callbacks:NOT_A_CLASS", "has no class 'NOT_A_CLASS' (NOT_A_CLASS is a int)"),
        ("my_callbacks:NoHooks", "class NoHooks has none of the hooks on_start, on_iteration"),
        ("my_callbacks:NeedsArguments", "NeedsArguments() must take no arguments"),
    ],
)
def test_bad_callback_specs_are_one_line_and_write_nothing(
    spec, message, tmp_path, capsys, monkeypatch
):
    monkeypatch.syspath_prepend(str(PLUGINS))
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        main(
            ["train", "--steps", "256", "--no-progress", "--log-dir", str(run), "--callback", spec]
        )
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not run.exists()
