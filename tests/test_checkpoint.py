"""Loading a run folder from someone else never runs code (docs/guide.md, "Run folders from
others"): crafted checkpoints, forged or foreign env pickles, and env ids that would import
a module are refused with one line naming the file; eval and resume fall back to the next
good checkpoint. Each test plants a real payload whose execution would create a file."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rlfw.cli import main
from rlfw.runfolder.checkpoint import (
    MARK,
    decode,
    encode,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)
from rlfw.runfolder.sealing import UnsealedError


class Payload:
    """Unpickled, it runs ``touch marker``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def plant(path: Path, marker: Path) -> None:
    torch.save({"agent": Payload(marker), "config": {}}, path)


def test_the_format_round_trips_exactly_without_pickles(tmp_path):
    state = {
        "rng": np.random.get_state(),
        "pcg": np.random.default_rng(3).bit_generator.state,
        "obs": np.arange(6, dtype=np.uint8).reshape(2, 3),
        "scalar": np.float32(2.5),
        "t": torch.arange(3),
        "nested": [(1, 2.0), {"k": None}],
        "blob": b"\x00env",
    }
    path = save_checkpoint(str(tmp_path), 1, state)
    # weights_only: nothing in the file names a Python global to import
    assert torch.serialization.get_unsafe_globals_in_checkpoint(path) == []
    back = load_checkpoint(path)
    assert back["pcg"] == state["pcg"] and back["blob"] == state["blob"]
    assert back["rng"][0] == "MT19937" and np.array_equal(back["rng"][1], state["rng"][1])
    assert back["obs"].dtype == np.uint8 and np.array_equal(back["obs"], state["obs"])
    assert type(back["scalar"]) is np.float32 and back["scalar"] == 2.5
    assert back["nested"] == [(1, 2.0), {"k": None}] and torch.equal(back["t"], state["t"])
    with pytest.raises(TypeError, match=r"'state.bad' is a Payload"):
        encode({"bad": Payload(tmp_path / "x")})


def test_eval_and_resume_skip_a_crafted_checkpoint_and_run_nothing(run, tmp_path, capsys):
    marker = tmp_path / "pwned"
    crafted = run / "checkpoints" / "ckpt_000000999999.pt"  # the newest
    plant(crafted, marker)
    assert main(["eval", str(run), "--episodes", "1"]) == 0
    err = capsys.readouterr().err
    assert f"skipped checkpoint {crafted}: " in err and "posix.system" in err
    assert "--trust-checkpoint" in err and not marker.exists()
    assert main(["train", "--resume", str(run), "--steps", "768", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"skipped damaged checkpoint {crafted}" in out and "done after 768" in out
    assert not marker.exists()


def test_eval_best_falls_back_from_a_crafted_best_pt(run, tmp_path, capsys):
    marker = tmp_path / "pwned"
    plant(run / "checkpoints" / "best.pt", marker)
    assert main(["eval", str(run), "--best", "--episodes", "1"]) == 0
    assert "skipped checkpoint" in capsys.readouterr().err and not marker.exists()


def test_only_crafted_checkpoints_is_one_error_naming_each(run, tmp_path, capsys):
    marker = tmp_path / "pwned"
    for path in list_checkpoints(str(run)):
        plant(Path(path), marker)
    with pytest.raises(SystemExit) as exc:
        main(["eval", str(run), "--episodes", "1"])
    err = capsys.readouterr().err
    assert exc.value.code == 1 and len(err.strip().splitlines()) == 1
    assert "ckpt_000000000256.pt: " in err and "ckpt_000000000512.pt: " in err
    with pytest.raises(SystemExit):
        main(["train", "--resume", str(run), "--no-progress"])
    assert not marker.exists()


def sealed_parts(tree):
    if isinstance(tree, dict):
        if tree.get(MARK) == "sealed":
            yield tree
        else:
            for value in tree.values():
                yield from sealed_parts(value)
    elif isinstance(tree, (list, tuple)):
        for value in tree:
            yield from sealed_parts(value)


def test_a_forged_env_pickle_is_refused_before_unpickling(run, tmp_path, capsys):
    import pickle

    marker = tmp_path / "pwned"
    newest = list_checkpoints(str(run))[-1]
    tree = torch.load(newest, weights_only=True)
    parts = list(sealed_parts(tree))
    assert parts, "the env state is stored sealed"
    for part in parts:  # the attacker keeps the tag, swaps the pickle
        part["data"] = torch.frombuffer(bytearray(pickle.dumps(Payload(marker))), dtype=torch.uint8)
    torch.save(tree, newest)
    with pytest.raises(UnsealedError, match="not sealed with this user's key"):
        load_checkpoint(newest)
    assert load_checkpoint(newest, "drop")["agent"]  # what eval needs is still there
    assert main(["train", "--resume", str(run), "--steps", "768", "--no-progress"]) == 0
    assert f"skipped damaged checkpoint {newest}" in capsys.readouterr().out
    assert not marker.exists()


def test_a_run_sealed_by_another_user_evaluates_and_resumes_only_when_trusted(
    run, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("RLFW_KEY_FILE", str(tmp_path / "other-user.key"))
    assert main(["eval", str(run), "--episodes", "1"]) == 0  # eval needs no env state
    with pytest.raises(SystemExit) as exc:
        main(["train", "--resume", str(run), "--steps", "768", "--no-progress"])
    err = capsys.readouterr().err
    assert exc.value.code == 1 and "not sealed with this user's key" in err
    assert "--trust-checkpoint" in err
    assert (
        main(
            ["train", "--resume", str(run), "--steps", "768", "--no-progress", "--trust-checkpoint"]
        )
        == 0
    )


def test_an_old_pickled_checkpoint_needs_the_explicit_flag(run, capsys):
    newest = list_checkpoints(str(run))[-1]
    old_style = decode(torch.load(newest, weights_only=True), "trust")
    torch.save(old_style, newest)  # numpy arrays pickled as objects, as before format 2
    for path in list_checkpoints(str(run))[:-1]:
        os.unlink(path)
    with pytest.raises(SystemExit) as exc:
        main(["eval", str(run), "--episodes", "1"])
    err = capsys.readouterr().err
    assert exc.value.code == 1 and "holds pickled objects (numpy" in err
    assert "--trust-checkpoint" in err
    assert main(["eval", str(run), "--episodes", "1", "--trust-checkpoint"]) == 0
    assert (
        main(
            ["train", "--resume", str(run), "--steps", "768", "--no-progress", "--trust-checkpoint"]
        )
        == 0
    )


EVIL_MODULE = "import pathlib\npathlib.Path('imported').touch()\n"


def rlfw(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlfw", *argv], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.mark.integration
def test_an_env_id_from_a_run_folder_never_imports_its_module(run, tmp_path):
    (tmp_path / "evilmod.py").write_text(EVIL_MODULE)
    config = (run / "config.json").read_text()
    (run / "config.json").write_text(
        config.replace('"env": "CartPole-v1"', '"env": "evilmod:CartPole-v1"')
    )
    for argv in (
        ["eval", str(run), "--episodes", "1"],
        ["train", "--resume", str(run), "--no-progress"],
        ["train", "--config", str(run / "config.json"), "--log-dir", "fresh"],
    ):
        done = rlfw(*argv, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "its env id 'evilmod:CartPole-v1' imports module 'evilmod'" in done.stderr
        assert "add --plugin evilmod if you trust it" in done.stderr
        assert not (tmp_path / "imported").exists()
    # named on the user's own command line, it is imported
    done = rlfw("eval", str(run), "--episodes", "1", "--plugin", "evilmod", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "imported").exists()


@pytest.mark.parametrize("plugins", [["myplug"], "myplug", "other,myplug"])
def test_a_run_s_plugins_must_be_named_however_its_config_spells_them(run, plugins, capsys):
    """The config reads text as a comma list: the check that the user named the run's
    modules reads it the same way, so no spelling of ``plugins`` slips past it."""
    import json

    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "plugins": plugins}))
    with pytest.raises(SystemExit) as exc:
        main(["eval", str(run), "--episodes", "1"])
    assert (
        exc.value.code == 2 and "imported (it was trained with --plugin" in capsys.readouterr().err
    )


@pytest.mark.integration
def test_env_id_with_a_module_from_the_command_line_is_the_users_choice(tmp_path):
    (tmp_path / "mymod.py").write_text(EVIL_MODULE)
    done = rlfw(
        "train",
        "--env",
        "mymod:CartPole-v1",
        "--steps",
        "256",
        "--no-progress",
        "--log-dir",
        "run",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "imported").exists()
