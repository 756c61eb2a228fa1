"""experiments/atari_report.py: a finished run becomes a committed report whose policy
folder holds the agent only and still evaluates with ``rlfw eval``."""
import subprocess
import sys
from pathlib import Path

import torch

from rlfw.cli import main
from rlfw.runfolder.checkpoint import FORMAT_KEY

REPORT = str(Path(__file__).parents[1] / "experiments" / "atari_report.py")


def test_report_keeps_only_the_agent_and_the_policy_still_evaluates(trained, tmp_path, capsys):
    out = tmp_path / "atari"
    done = subprocess.run([sys.executable, REPORT, str(trained), "--out", str(out), "--name",
                           "policy", "--episodes", "2"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (ckpt,) = (out / "policy" / "checkpoints").glob("ckpt_*.pt")
    tree = torch.load(ckpt, weights_only=True)
    assert set(tree) - {FORMAT_KEY} == {"agent"}, set(tree)
    assert (out / "policy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (out / "policy.md").read_text()
    assert "512 env steps" in text and "| 256 |" in text and "| 512 |" in text
    # the command rebuilds the run: every setting the CLI flags changed from the preset
    assert ("--steps 512 --seed 0 --set schedule.eval_every=256 --set schedule.eval_episodes=2"
            " --set schedule.checkpoint_every=256`") in text, text[:600]
    assert main(["eval", str(out / "policy"), "--episodes", "2"]) == 0
    assert "over 2 episodes" in capsys.readouterr().out


def test_changed_from_preset_names_each_flag_that_rebuilds_the_run():
    from rlfw.cli import config_from_args, make_parser
    from rlfw.launch.config import RunConfig, changed_from_preset, set_argument

    config = RunConfig.for_env("ALE/Pong-v5", "ppo", steps=2048, seed=3,
                               ppo={"epochs": 3, "amp": None}, model="mlp", hidden=(32, 32))
    changes = changed_from_preset(config)  # the Atari preset: 8 epochs under bf16
    assert changes == {"model": "mlp", "hidden": (32, 32), "ppo.epochs": 3, "ppo.amp": None}
    flags = [arg for k, v in changes.items() for arg in ("--set", set_argument(k, v))]
    args = make_parser().parse_args(["train", "--algo", "ppo", "--env", "ALE/Pong-v5",
                                     "--steps", "2048", "--seed", "3", *flags])
    assert changes == changed_from_preset(config_from_args(args))
    dqn = RunConfig.for_env("CartPole-v1", "dqn", steps=10_000)
    dqn.c51.atoms = 21  # a registered algorithm's config, made on first use
    assert changed_from_preset(dqn) == {"c51.atoms": 21}


def test_every_committed_policy_loads_without_running_code_and_holds_the_agent_only():
    """What a user downloads with the repository is input like any other: each checkpoint
    under docs/ must load with pickles refused and carry the agent's weights alone."""
    from rlfw.runfolder.checkpoint import load_checkpoint

    docs = Path(__file__).parents[1] / "docs"
    committed = sorted(p for p in docs.rglob("*.pt") if "runs" not in p.relative_to(docs).parts)
    assert committed, "the Pong policies are committed under docs/benchmarks/atari/"
    for path in committed:
        state = load_checkpoint(str(path))  # pickles refused: UnsafeCheckpointError otherwise
        assert set(state) == {"agent"}, (path, set(state))
        assert (path.parents[1] / "config.json").is_file(), path
