"""``rlfw export``: a policy folder of weights (safetensors), config and model card that
``rlfw eval`` plays to the numbers of the run it came from; bad input writes nothing."""

import os
import re

import pytest
import torch
from safetensors.torch import load_file, save_file

from rlfw.cli import main
from rlfw.launch import export as export_module
from rlfw.launch.config import RunConfig
from rlfw.launch.evaluate import evaluate_checkpoint
from rlfw.launch.export import export_policy
from rlfw.runfolder.checkpoint import latest_checkpoint, load_checkpoint


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("export") / "run"
    assert (
        main(
            [
                "train",
                "--steps",
                "2048",
                "--no-progress",
                "--log-dir",
                str(folder),
                "--set",
                "n_eval_envs=2",
            ]
        )
        == 0
    )
    return folder


def _printed_score(text: str) -> str:
    return re.search(r"mean return (\S+ ± \S+ over \d+ episodes)", text).group(1)


def test_exported_folder_evaluates_to_the_run_s_numbers(run, tmp_path, capsys):
    out = tmp_path / "policy"
    assert main(["export", str(run), str(out), "--episodes", "6", "--seed", "7", "--no-gif"]) == 0
    exported = _printed_score(capsys.readouterr().out)
    assert sorted(os.listdir(out)) == ["README.md", "config.json", "model.safetensors"]
    for argv in (["eval", str(out)], ["eval", str(run)]):
        assert main(argv + ["--episodes", "6", "--seed", "7"]) == 0
        assert _printed_score(capsys.readouterr().out) == exported
    config = RunConfig.load(str(run))
    assert (
        evaluate_checkpoint(str(out), 6, seed=3).tolist()
        == evaluate_checkpoint(str(run), 6, seed=3, config=config).tolist()
    )


def test_the_folder_holds_the_agent_s_weights_and_a_model_card(run, tmp_path):
    out = tmp_path / "policy"
    done = export_policy(str(run), str(out), RunConfig.load(str(run)), episodes=3, gif=False)
    weights = load_file(str(out / "model.safetensors"))
    agent = load_checkpoint(latest_checkpoint(str(run)))["agent"]
    assert set(weights) == set(agent)
    assert all(torch.equal(weights[k], agent[k]) for k in agent)
    card = (out / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: rlfw\n")
    assert f"mean return {done.returns.mean():.2f} ± {done.returns.std():.2f} over 3" in card
    assert "rlfw train --algo ppo --env CartPole-v1" in card and "--steps 2048" in card
    assert "--set n_eval_envs=2" in card and "rlfw version" in card
    assert RunConfig.load(str(out)).to_dict() == RunConfig.load(str(run)).to_dict()
    mask = os.umask(0)
    os.umask(mask)
    assert (out / "model.safetensors").stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_gif_of_one_episode_when_the_video_extra_is_there(run, tmp_path):
    pytest.importorskip("imageio_ffmpeg", reason="the [video] extra")
    out = tmp_path / "policy"
    done = export_policy(str(run), str(out), RunConfig.load(str(run)), episodes=1)
    assert done.gif and (out / "replay.gif").read_bytes()[:6] in (b"GIF89a", b"GIF87a")
    assert "![replay](replay.gif)" in (out / "README.md").read_text()


@pytest.mark.parametrize(
    "case", ["not empty", "a file", "no checkpoint", "no run", "best of a policy"]
)
def test_bad_input_is_one_line_and_writes_nothing(case, run, tmp_path, capsys):
    out = tmp_path / "out"
    source = str(run)
    if case == "not empty":
        out.mkdir()
        (out / "mine.txt").write_text("keep")
    elif case == "a file":
        out.write_text("keep")
    elif case == "no checkpoint":
        source = str(tmp_path / "fresh")
        os.makedirs(source)
        (tmp_path / "fresh" / "config.json").write_text((run / "config.json").read_text())
    elif case == "no run":
        source = str(tmp_path / "nothing")
    else:
        source = str(tmp_path / "exported")
        assert main(["export", str(run), source, "--episodes", "1", "--no-gif"]) == 0
        capsys.readouterr()
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(SystemExit) as exc:
        main(
            ["export", source, str(out), "--no-gif"]
            + (["--best"] if case.startswith("best") else [])
        )
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1, err
    expected = {
        "not empty": "is a folder that is not empty",
        "a file": "is a file",
        "no checkpoint": "no checkpoint",
        "no run": "no config.json",
        "best of a policy": "--best is only for run folders",
    }[case]
    assert expected in err
    assert sorted(os.listdir(tmp_path)) == before  # no OUT, no staging folder
    if case == "not empty":
        assert os.listdir(out) == ["mine.txt"]


def test_a_failure_while_exporting_leaves_nothing(run, tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("evaluation failed")

    monkeypatch.setattr(export_module, "evaluate_checkpoint", broken)
    with pytest.raises(RuntimeError, match="evaluation failed"):
        export_policy(str(run), str(tmp_path / "out"), RunConfig.load(str(run)), gif=False)
    assert os.listdir(tmp_path) == []


def test_weights_that_are_not_an_rlfw_policy_are_refused(tmp_path, run):
    out = tmp_path / "foreign"
    out.mkdir()
    (out / "config.json").write_text((run / "config.json").read_text())
    save_file({"w": torch.zeros(2)}, str(out / "model.safetensors"))
    with pytest.raises(ValueError, match="is not an rlfw policy"):
        evaluate_checkpoint(str(out), 1)
    (out / "model.safetensors").write_bytes(b"not safetensors at all")
    with pytest.raises(ValueError, match="is not a readable safetensors file"):
        evaluate_checkpoint(str(out), 1)


def test_onnx_export_runs_in_onnxruntime_as_the_agent_acts(run, tmp_path, capsys):
    """``--onnx``: policy.onnx gives the agent's greedy actions on observations it was not
    checked on, and the model card shows how to run it."""
    import numpy as np
    import onnxruntime

    from rlfw.envs import EnvSpaces
    from rlfw.launch.build import build_agent
    from rlfw.runfolder.policy_folder import load_policy_weights

    out = tmp_path / "policy"
    assert main(["export", str(run), str(out), "--episodes", "2", "--no-gif", "--onnx"]) == 0
    assert (
        "policy.onnx" in os.listdir(out)
        and "onnxruntime.InferenceSession" in (out / "README.md").read_text()
    )
    session = onnxruntime.InferenceSession(str(out / "policy.onnx"))
    obs = np.random.default_rng(0).normal(size=(50, 4)).astype(np.float32)
    (action,) = session.run(None, {"observation": obs})
    config = RunConfig.load(str(run))
    agent = build_agent(config, EnvSpaces.of(config.env_factory()))
    agent.load_state_dict(load_policy_weights(str(out)))
    agent.eval_mode()
    expected = agent.step(obs, np.zeros((50,), np.float32)).action.numpy()
    assert action.tolist() == expected.tolist() and len(set(expected.tolist())) == 2


def test_the_onnx_check_refuses_a_graph_that_disagrees(tmp_path, monkeypatch):
    """An exported graph whose actions differ from the agent's is not written."""
    import gymnasium as gym
    import numpy as np

    from rlfw.agents import ActorCriticAgent
    from rlfw.envs import EnvSpaces
    from rlfw.launch import onnx_export

    agent = ActorCriticAgent.build(
        EnvSpaces(gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Discrete(2))
    )
    real = onnx_export.GreedyPolicy.forward
    calls = []

    def off_by_one_the_first_time(self, *inputs):  # the reference the graph is checked on
        calls.append(1)
        return real(self, *inputs) + (1 if len(calls) == 1 else 0)

    monkeypatch.setattr(onnx_export.GreedyPolicy, "forward", off_by_one_the_first_time)
    obs = np.zeros((8, 3), np.float32)
    with pytest.raises(RuntimeError, match="policy's action disagrees with the agent"):
        onnx_export.export_onnx(agent, obs, str(tmp_path / "policy.onnx"))
    assert os.listdir(tmp_path) == []
