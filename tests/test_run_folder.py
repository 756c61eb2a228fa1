"""One run per folder, files written whole and never through a symlink, progress.csv cut
back on resume, and every way a run folder or its start can go wrong is one line."""

import csv
import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlfw.cli import main
from rlfw.runfolder.checkpoint import list_checkpoints, load_checkpoint
from rlfw.runfolder.folder_lock import LOCK_NAME, FolderBusyError, FolderLock

from conftest import TINY_TRAIN

TRAIN = TINY_TRAIN


def csv_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as f:
        header, *rows = list(csv.reader(f))
    return header, rows


def test_the_lock_is_exclusive_names_its_holder_and_dies_with_it(tmp_path):
    lock = FolderLock.acquire(str(tmp_path))
    busy = f"in use by another rlfw run \\(pid {os.getpid()}\\)"
    with pytest.raises(FolderBusyError, match=busy):
        FolderLock.acquire(str(tmp_path))
    lock.release()
    FolderLock.acquire(str(tmp_path)).release()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from "
            "rlfw.runfolder.folder_lock import FolderLock; "
            "lock = FolderLock.acquire(sys.argv[1]); "
            "print('held', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(FolderBusyError, match=f"pid {holder.pid}"):
            FolderLock.acquire(str(tmp_path))
    finally:
        holder.kill()  # a crash: the kernel drops its lock
        holder.wait()
    FolderLock.acquire(str(tmp_path)).release()


@pytest.mark.integration
def test_a_second_train_into_a_running_folder_is_refused_at_once(tmp_path):
    run = tmp_path / "run"
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlfw",
            "train",
            "--steps",
            "500000",
            "--eval-every",
            "250000",
            "--checkpoint-every",
            "2048",
            "--set",
            "schedule.log_every=1024",
            "--seed",
            "1",
            "--no-progress",
            "--log-dir",
            str(run),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 120
        while (
            not (list_checkpoints(str(run)) and (run / "progress.csv").exists())
            and time.time() < deadline
        ):
            time.sleep(0.2)
        assert list_checkpoints(str(run)), "the first run did not start"
        started = time.perf_counter()
        second = subprocess.run(
            [sys.executable, "-m", "rlfw", *TRAIN, "--seed", "2", "--log-dir", str(run)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 2
        assert f"is in use by another rlfw run (pid {first.pid})" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
        assert time.perf_counter() - started < 30  # refused before building anything
    finally:
        first.send_signal(signal.SIGINT)
        try:
            _, err = first.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            first.kill()
            _, err = first.communicate()
            pytest.fail(f"Ctrl-C did not stop the run within 120 s: {err[-2000:]}")
    assert first.returncode == 130, err[-2000:]
    # the first run's folder is all seed 1: config, checkpoints and every progress row
    assert '"seed": 1' in (run / "config.json").read_text()
    newest = load_checkpoint(list_checkpoints(str(run))[-1], "drop")
    assert newest["config"]["seed"] == 1
    header, rows = csv_rows(run / "progress.csv")
    steps = [int(r[0]) for r in rows]
    assert all(len(r) == len(header) for r in rows) and steps == sorted(set(steps))


@pytest.mark.parametrize("name", ["config.json", "progress.csv"])
def test_a_fresh_run_never_overwrites_another_runs_files(tmp_path, name, capsys):
    folder = tmp_path / "someone"
    folder.mkdir()
    (folder / name).write_text("someone's\n")
    with pytest.raises(SystemExit) as exc:
        main([*TRAIN, "--log-dir", str(folder)])
    assert exc.value.code == 2
    assert f"already holds a run ({name})" in capsys.readouterr().err
    assert (folder / name).read_text() == "someone's\n"


def test_symlinks_in_the_folder_are_replaced_never_followed(run, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("progress.csv", "config.json", "learning_curve.png"):
        (outside / name).write_text("precious\n")
        (run / name).unlink()
        (run / name).symlink_to(outside / name)
    assert main(["train", "--resume", str(run), "--steps", "768", "--no-progress"]) == 0
    for name in ("progress.csv", "config.json", "learning_curve.png"):
        assert (outside / name).read_text() == "precious\n"
        assert not (run / name).is_symlink()


def test_resume_cuts_progress_csv_back_to_its_checkpoint(run):
    header, rows = csv_rows(run / "progress.csv")
    assert [r[0] for r in rows] == ["256", "512"]
    os.unlink(list_checkpoints(str(run))[-1])  # the run crashed between row 512 and its ckpt
    with open(run / "progress.csv", "a") as f:
        f.write("768,0.5,1")  # and while writing a row: half of it, no newline
    assert main(["train", "--resume", str(run), "--steps", "768", "--no-progress"]) == 0
    header, rows = csv_rows(run / "progress.csv")
    assert [r[0] for r in rows] == ["256", "512", "768"]  # none twice, none cut
    assert all(len(r) == len(header) for r in rows)


def test_resume_refuses_flags_that_contradict_the_run(run, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", "--resume", str(run), "--lr", "0.5", "--algo", "a2c", "--no-progress"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "contradicts the run" in err
    assert "algo='a2c' (the run has 'ppo')" in err and "a2c.learning_rate=0.5" in err
    same_lr = load_checkpoint(list_checkpoints(str(run))[-1], "drop")["config"]["ppo"]
    assert (
        main(
            [
                "train",
                "--resume",
                str(run),
                "--steps",
                "768",
                "--no-progress",
                "--set",
                f"ppo.learning_rate={same_lr['learning_rate']}",
            ]
        )
        == 0
    )


def test_an_unreadable_config_json_falls_back_to_the_checkpoints(run, capsys):
    (run / "config.json").write_text("{ half a file")
    assert main(["train", "--resume", str(run), "--steps", "768", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "is not valid JSON" in captured.err and "using the config saved in" in captured.err
    assert "done after 768 env steps" in captured.out
    assert '"env": "CartPole-v1"' in (run / "config.json").read_text()  # written anew


def test_no_abbreviated_flags(run, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", "--res", str(run)])
    assert exc.value.code == 2 and "unrecognized arguments: --res" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(
            [
                "sweep",
                "--runs-dir",
                str(run.parent / "sweep"),
                "--grid",
                "ppo.epochs=2",
                "--res",
                str(run),
            ]
        )
    assert "remove --res from the train flags" in capsys.readouterr().err


@pytest.mark.parametrize(
    "bad,message",
    [
        ("file", "exists and is not a folder"),
        ("list", "holds a JSON list, not an object"),
    ],
)
def test_bad_folders_and_config_files_are_one_line(tmp_path, bad, message, capsys):
    target = tmp_path / "target"
    if bad == "file":
        target.write_text("a file")
        argv = [*TRAIN, "--log-dir", str(target)]
    else:
        target.write_text("[1, 2]")
        argv = [*TRAIN, "--config", str(target), "--log-dir", str(tmp_path / "run")]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EROFS])
def test_a_full_disk_or_read_only_folder_is_one_line_and_loses_nothing(
    run, error, capsys, monkeypatch
):
    # (as root, permissions do not stop writes: the error is injected where the disk gives it)
    before = {p: Path(p).read_bytes() for p in list_checkpoints(str(run))}

    def fails(fd):
        raise OSError(error, os.strerror(error))

    monkeypatch.setattr(os, "fsync", fails)  # a checkpoint's write reaches the disk here
    assert main(["train", "--resume", str(run), "--steps", "1024", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert f"rlfw: error: {os.strerror(error)}: " in err
    assert f"newest checkpoint {list_checkpoints(str(run))[-1]}; resume with" in err
    assert {p: Path(p).read_bytes() for p in list_checkpoints(str(run))} == before
    assert not [n for n in os.listdir(run / "checkpoints") if n.startswith(".tmp-")]
    monkeypatch.undo()
    assert main(["train", "--resume", str(run), "--steps", "1024", "--no-progress"]) == 0


def test_ctrl_c_while_starting_is_one_line_and_claims_no_checkpoint(tmp_path, capsys, monkeypatch):
    import rlfw.launch.build as build

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "build_sampler", interrupted)
    assert main([*TRAIN, "--log-dir", str(tmp_path / "run")]) == 130
    err = capsys.readouterr().err
    assert err.strip() == (
        f"rlfw: interrupted while starting; no checkpoint was written in "
        f"{tmp_path / 'run'}; the same command starts the run again"
    )
    monkeypatch.undo()
    assert main([*TRAIN, "--log-dir", str(tmp_path / "run")]) == 0  # the folder is free


def test_a_run_that_fails_before_its_first_checkpoint_says_how_to_start_again(
    tmp_path, capsys, monkeypatch
):
    """A run folder with a config and no checkpoint can be neither resumed nor reused by a
    fresh run: the advice names the way that works, and it does. W&B that will not start
    (no login) is such a failure, one clean error line."""
    import wandb

    def no_login(*args, **kwargs):
        raise wandb.errors.UsageError("No API key configured. Use `wandb login` to log in.")

    monkeypatch.setattr(wandb, "init", no_login)
    run = tmp_path / "run"
    assert main([*TRAIN, "--log-dir", str(run), "--wandb"]) == 2
    err = capsys.readouterr().err
    assert (
        "rlfw: error: --wandb could not start a W&B run (UsageError: No API key configured. "
        "Use `wandb login` to log in): log in (`wandb login`), or log offline with "
        "WANDB_MODE=offline"
    ) in err
    advice = (
        f"rlfw: no checkpoint was written in {run}, so there is nothing to resume; start "
        f"the run again in a new folder (python -m rlfw train --config "
        f"{run / 'config.json'} --log-dir NEW_DIR), or delete {run} and run the same "
        "command"
    )
    assert advice in err and "Traceback" not in err
    # what does not work: resuming it, or reusing the folder
    assert main(["train", "--resume", str(run), "--no-progress"]) == 1
    assert advice in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*TRAIN, "--log-dir", str(run)])
    assert "already holds a run (config.json)" in capsys.readouterr().err
    monkeypatch.undo()
    assert (
        main(
            [
                "train",
                "--config",
                str(run / "config.json"),
                "--set",
                "wandb.enabled=false",
                "--log-dir",
                str(tmp_path / "again"),
                "--no-progress",
            ]
        )
        == 0
    )


def test_the_lock_file_is_left_but_never_a_symlink(tmp_path):
    (tmp_path / LOCK_NAME).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        FolderLock.acquire(str(tmp_path))
    assert not (tmp_path / "elsewhere").exists()


def test_ctrl_c_inside_a_write_waits_for_its_end():
    from rlfw.utils.interrupts import deferred_interrupt

    done = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            with deferred_interrupt():  # nested: the outer one raises, after both ends
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                done.append("inner")
            done.append("outer")
    assert done == ["inner", "outer"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
