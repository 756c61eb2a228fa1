"""``python -m rlfw``: bad input fails before work starts; train/eval/resume work."""
import subprocess
import sys

import pytest

from rlfw.cli import main

FAST = ["--steps", "512", "--eval-every", "256", "--eval-episodes", "2", "--no-progress"]


@pytest.mark.parametrize("argv,message", [
    (["train", "--algo", "sac"], "algorithm 'sac' unknown; choose from ('ppo', 'a2c', 'dqn')"),
    (["train", "--sampler", "warp"], "sampler 'warp' unknown; choose from"),
    (["train", "--env", "NoSuchEnv-v0"], "unknown env id 'NoSuchEnv-v0'"),
    (["train", "--n-envs", "0"], "batch_B must be a positive integer, got 0"),
    (["train", "--batch-T", "-3"], "batch_T must be a positive integer, got -3"),
    (["train", "--steps", "0"], "n_steps must be a positive integer, got 0"),
    (["train", "--lr", "-1"], "learning_rate = -1.0 is invalid"),
    (["train", "--env", "Pendulum-v1", "--algo", "ppo", "--model", "cnn"],
     "model 'cnn' needs [C, H, W] image observations, got shape (3,)"),
])
def test_bad_input_is_a_clear_error_before_any_work(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(argv + ["--log-dir", str(tmp_path / "run")])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # nothing was started


def test_unsupported_action_space_is_refused(capsys, tmp_path):
    # Blackjack has a Tuple observation space; the agent refuses it by name.
    with pytest.raises(SystemExit):
        main(["train", "--env", "Blackjack-v1", "--log-dir", str(tmp_path)])
    assert "observation space Tuple" in capsys.readouterr().err


def test_resume_and_eval_need_a_run_folder(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["train", "--resume", str(tmp_path)])
    assert exc.value.code == 2 and "no config.json" in capsys.readouterr().err
    (tmp_path / "config.json").write_text('{"algo": "ppo", "env": "CartPole-v1"}')
    with pytest.raises(SystemExit):
        main(["eval", str(tmp_path)])
    assert "no checkpoint in" in capsys.readouterr().err


def test_train_then_resume_then_eval(tmp_path, capsys):
    run = str(tmp_path / "run")
    assert main(["train", "--algo", "a2c", "--log-dir", run, *FAST]) == 0
    out = capsys.readouterr().out
    assert "done after 520 env steps" in out  # 13 iterations of 8 envs x 5 steps
    assert main(["train", "--resume", run, "--no-progress"]) == 0  # already complete: no-op
    capsys.readouterr()
    assert main(["eval", run, "--episodes", "3"]) == 0
    out = capsys.readouterr().out
    assert "mean return" in out and "over 3 episodes" in out


def test_module_entry_point_help_documents_flags():
    out = subprocess.run([sys.executable, "-m", "rlfw", "train", "--help"], capture_output=True,
                         text=True, check=True).stdout
    for flag in ("--algo", "--env", "--sampler", "--n-envs", "--steps", "--seed", "--log-dir",
                 "--resume", "--stop-at-return"):
        assert flag in out


def test_parallel_sampler_from_the_cli_and_bad_worker_count(tmp_path, capsys):
    run = str(tmp_path / "run")
    assert main(["train", "--sampler", "cpu", "--n-workers", "2", "--log-dir", run, *FAST]) == 0
    assert "sampler cpu" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["train", "--sampler", "cpu", "--n-envs", "2", "--n-workers", "3",
              "--log-dir", str(tmp_path / "bad")])
    assert exc.value.code == 2 and "n_workers=3 exceeds batch_B=2" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--sampler", "native", "--env", "CartPole-v1",
              "--log-dir", str(tmp_path / "bad2")])
    assert "sampler 'native' runs ALE games only" in capsys.readouterr().err


def test_bench_sampler_prints_steps_per_second(capsys):
    assert main(["bench-sampler", "--env", "CartPole-v1", "--sampler", "serial", "--n-envs", "4",
                 "--seconds", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "serial sampler on CartPole-v1:" in out and "env steps/s" in out
    with pytest.raises(SystemExit):
        main(["bench-sampler", "--seconds", "0"])
    assert "--seconds must be > 0, got 0.0" in capsys.readouterr().err
