"""experiments/atari_report.py: a finished run becomes a committed report; the headline
run's policy is an exported folder (weights only) that still evaluates with ``rlfw eval``."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlfw.cli import main

REPORT = str(Path(__file__).parents[1] / "experiments" / "atari_report.py")


@pytest.mark.integration
def test_report_keeps_the_record_and_exports_the_policy_that_still_evaluates(
    trained, tmp_path, capsys
):
    out = tmp_path / "atari"
    done = subprocess.run(
        [
            sys.executable,
            REPORT,
            str(trained),
            "--out",
            str(out),
            "--name",
            "policy",
            "--episodes",
            "2",
            "--policy",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(os.listdir(out / "policy")) == ["config.json", "progress.csv"]
    assert sorted(os.listdir(out / "policy-policy")) == [
        "README.md",
        "config.json",
        "model.safetensors",
    ]
    assert (out / "policy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (out / "policy.md").read_text()
    assert "512 env steps" in text and "| 256 |" in text and "| 512 |" in text
    # the command rebuilds the run: every setting the CLI flags changed from the preset
    assert (
        "--steps 512 --seed 0 --set schedule.eval_every=256 --set schedule.eval_episodes=2"
        " --set schedule.checkpoint_every=256`"
    ) in text, text[:600]
    assert "Committed policy: `" in text and "policy-policy" in text
    assert main(["eval", str(out / "policy-policy"), "--episodes", "2"]) == 0
    assert "over 2 episodes" in capsys.readouterr().out


def test_changed_from_preset_names_each_flag_that_rebuilds_the_run():
    from rlfw.cli import config_from_args, make_parser
    from rlfw.launch.config import RunConfig, changed_from_preset, set_argument

    config = RunConfig.for_env(
        "ALE/Pong-v5",
        "ppo",
        steps=2048,
        seed=3,
        ppo={"epochs": 3, "amp": None},
        model="mlp",
        hidden=(32, 32),
    )
    changes = changed_from_preset(config)  # the Atari preset: 8 epochs under bf16
    assert changes == {"model": "mlp", "hidden": (32, 32), "ppo.epochs": 3, "ppo.amp": None}
    flags = [arg for k, v in changes.items() for arg in ("--set", set_argument(k, v))]
    args = make_parser().parse_args(
        ["train", "--algo", "ppo", "--env", "ALE/Pong-v5", "--steps", "2048", "--seed", "3", *flags]
    )
    assert changes == changed_from_preset(config_from_args(args))
    dqn = RunConfig.for_env("CartPole-v1", "dqn", steps=10_000)
    dqn.dqn.gamma = 0.5
    dqn.c51.atoms = 21  # another algorithm's settings: the run never reads them
    assert changed_from_preset(dqn) == {"dqn.gamma": 0.5}


def test_every_committed_policy_is_an_exported_folder_that_loads_without_running_code():
    """What a user downloads with the repository is input like any other: policies under
    docs/ are exported folders (safetensors weights, no pickles) and no checkpoint is
    committed beside them."""
    from rlfw.launch.config import RunConfig
    from rlfw.runfolder.policy_folder import load_policy_weights

    docs = Path(__file__).parents[1] / "docs"
    outside_runs = lambda p: "runs" not in p.relative_to(docs).parts  # noqa: E731
    assert not [p for p in docs.rglob("*.pt") if outside_runs(p)], "checkpoints under docs/"
    policies = sorted(p.parent for p in docs.rglob("model.safetensors") if outside_runs(p))
    assert policies, "the Pong policy is committed under docs/benchmarks/atari/"
    for folder in policies:
        assert load_policy_weights(str(folder))  # an rlfw policy, tensors only
        RunConfig.load(str(folder))
        assert (folder / "README.md").is_file()
        assert sum(f.stat().st_size for f in folder.iterdir()) <= 8 * 2**20, folder
