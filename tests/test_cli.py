"""``python -m rlfw``: bad input fails before work starts; train/eval/resume work."""

import argparse
import subprocess
import sys

import pytest

from rlfw.cli import main, make_parser
from rlfw.registry import ALGOS
from rlfw.runfolder.checkpoint import load_checkpoint
from rlfw.samplers.machinery.workers import default_workers

FAST = ["--steps", "512", "--eval-every", "256", "--eval-episodes", "2", "--no-progress"]


@pytest.mark.parametrize(
    "argv,message",
    [
        (["train", "--algo", "apex"], f"algorithm 'apex' unknown; choose from {ALGOS.names()}"),
        (
            ["train", "--algo", "appo", "--set", "appo.vtrace_rho=0"],
            "APPOConfig.vtrace_rho = 0.0 is invalid: must be > 0 (V-trace's ρ̄)",
        ),
        (
            ["train", "--algo", "impala", "--set", "impala.vtrace_c=-1"],
            "IMPALAConfig.vtrace_c = -1.0 is invalid: must be > 0 (V-trace's c̄)",
        ),
        (
            ["train", "--algo", "appo", "--set", "appo.gae_lambda=1.5"],
            "APPOConfig.gae_lambda = 1.5 is invalid: must be in [0, 1]",
        ),
        (
            ["train", "--algo", "impala", "--set", "impala.advantage=gae"],
            "IMPALAConfig.advantage = 'gae' is invalid: impala is a2c on V-trace targets and takes "
            "'vtrace' (for GAE use --algo a2c)",
        ),
        (
            ["train", "--algo", "dqn", "--set", "dqn.advantage=vtrace"],
            "unknown config key 'dqn.advantage'; dqn's keys: dqn.learning_rate,",
        ),
        (["train", "--sampler", "warp"], "sampler 'warp' unknown; choose from"),
        (["train", "--env", "NoSuchEnv-v0"], "unknown env id 'NoSuchEnv-v0'"),
        (["train", "--n-envs", "0"], "batch_B must be a positive integer, got 0"),
        (["train", "--batch-T", "-3"], "batch_T must be a positive integer, got -3"),
        (["train", "--steps", "0"], "n_steps must be a positive integer, got 0"),
        (["train", "--lr", "-1"], "learning_rate = -1.0 is invalid"),
        (
            ["train", "--env", "Pendulum-v1", "--algo", "ppo", "--model", "cnn"],
            "model 'cnn' needs [C, H, W] image observations, got shape (3,)",
        ),
        (
            ["train", "--runner", "warp"],
            "runner 'warp' unknown; choose from ('sync', 'concurrent', 'async')",
        ),
        (
            ["train", "--runner", "async", "--set", "async_lead=0"],
            "async_lead must be a positive integer, got 0",
        ),
        (["train", "--set", "async_lead=4"], "async_lead=4 is for runner 'async'"),
        (
            ["train", "--runner", "async", "--set", "async_handoff=0"],
            "async_handoff must be a positive integer, got 0",
        ),
        (["train", "--set", "async_handoff=8"], "async_handoff=8 is for runner 'async'"),
        (["train", "--n-workers", "auto"], "n_workers 'auto' with sampler 'serial' cannot work"),
        (["train", "--n-workers", "many"], "takes a positive integer or 'auto', got 'many'"),
        (
            ["train", "--algo", "ppo", "--dueling"],
            "--dueling sets dueling, which algo 'ppo' does not have; algorithms with it: dqn",
        ),
    ],
)
def test_bad_input_is_a_clear_error_before_any_work(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(argv + ["--log-dir", str(tmp_path / "run")])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # nothing was started


def test_a_tuple_observation_trains_from_the_command_line(capsys, tmp_path):
    # Blackjack observes a Tuple of three Discretes: one-hot encoded, leaf by leaf (its
    # preset's batch is 8 x 256; two batches of 8 x 32 keep the run short)
    run = str(tmp_path / "run")
    small = ["--batch-B", "8", "--batch-T", "32"]
    assert main(["train", "--env", "Blackjack-v1", "--log-dir", run, *small, *FAST]) == 0
    assert "done after 512 env steps" in capsys.readouterr().out


def test_resume_and_eval_need_a_run_folder(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["train", "--resume", str(tmp_path)])
    assert exc.value.code == 2 and "no config.json" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # eval's words are not resume's
        main(["eval", str(tmp_path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "no config.json" in err and "cannot resume" not in err
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
    for flags, message in (
        (["--episodes", "0"], "episodes must be a positive integer, got 0"),
        (["--seed", "-1"], "seed must be an integer from 0 to 2**32 - 1, got -1"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(["eval", run, *flags])
        assert exc.value.code == 2 and message in capsys.readouterr().err


def test_module_entry_point_help_documents_flags():
    out = subprocess.run(
        [sys.executable, "-m", "rlfw", "train", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for flag in (
        "--algo",
        "--env",
        "--sampler",
        "--n-envs",
        "--steps",
        "--seed",
        "--log-dir",
        "--resume",
        "--stop-at-return",
    ):
        assert flag in out


def test_parallel_sampler_from_the_cli_and_bad_worker_count(tmp_path, capsys):
    run = str(tmp_path / "run")
    assert main(["train", "--sampler", "cpu", "--n-workers", "2", "--log-dir", run, *FAST]) == 0
    assert "sampler cpu" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "train",
                "--sampler",
                "cpu",
                "--n-envs",
                "2",
                "--n-workers",
                "3",
                "--log-dir",
                str(tmp_path / "bad"),
            ]
        )
    assert exc.value.code == 2 and "n_workers=3 exceeds batch_B=2" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(
            [
                "train",
                "--sampler",
                "native",
                "--env",
                "CartPole-v1",
                "--log-dir",
                str(tmp_path / "bad2"),
            ]
        )
    assert "sampler 'native' runs ALE games only" in capsys.readouterr().err


@pytest.mark.parametrize("runner", ["concurrent", "async"])
def test_runner_flag_trains_and_is_saved_in_config(runner, tmp_path, capsys):
    from rlfw.launch.config import RunConfig

    run = str(tmp_path / "run")
    assert (
        main(
            [
                "train",
                "--runner",
                runner,
                "--sampler",
                "cpu",
                "--n-workers",
                "2",
                "--log-dir",
                run,
                *FAST,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"runner {runner}" in out and "done after 512 env steps" in out
    assert RunConfig.load(run).runner == runner


@pytest.mark.integration
def test_auto_workers_from_the_cli_prints_trials_and_saves_the_choice(tmp_path, capsys):
    from rlfw.launch.config import RunConfig

    run = str(tmp_path / "run")
    assert (
        main(
            [
                "train",
                "--sampler",
                "cpu",
                "--n-workers",
                "auto",
                "--n-envs",
                "2",
                "--set",
                "tune_seconds=0.3",
                "--log-dir",
                run,
                *FAST,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "tuning n_workers: 1 ->" in out and "tuning n_workers: chose" in out
    saved = RunConfig.load(run)
    assert saved.n_workers in (1, 2) and not saved.tune_workers


def test_bench_sampler_prints_steps_per_second(capsys):
    assert (
        main(
            [
                "bench-sampler",
                "--env",
                "CartPole-v1",
                "--sampler",
                "serial",
                "--n-envs",
                "4",
                "--seconds",
                "0.5",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    # T: what `rlfw train --env CartPole-v1` would use (its preset), as no flag gave it
    assert "serial sampler on CartPole-v1:" in out and "(4 envs in this process, T=32)" in out

    assert (
        main(
            [
                "bench-sampler",
                "--env",
                "CartPole-v1",
                "--sampler",
                "cpu",
                "--n-envs",
                "4",
                "--seconds",
                "0.5",
            ]
        )
        == 0
    )  # the workers it really started, not 'default'
    assert f"(4 envs, {default_workers(4)} workers, T=32)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["bench-sampler", "--seconds", "0"])
    assert "--seconds must be > 0, got 0.0" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the serial sampler has no workers to count
        main(["bench-sampler", "--sampler", "serial", "--n-workers", "4"])
    assert "config key 'n_workers' is for samplers with worker processes" in capsys.readouterr().err


def _options(parser_of_command: argparse.ArgumentParser) -> dict[str, tuple[str, ...]]:
    """Each option's help text by its flag names."""
    return {
        action.option_strings[0]: (action.help or "", *action.option_strings)
        for action in parser_of_command._actions
        if action.option_strings and action.option_strings[0] != "-h"
    }


def _subcommand(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in make_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_bench_sampler_s_sampler_flags_are_train_s_and_every_option_has_help():
    """One declaration per setting: bench-sampler's sampler flags are train's (the same
    names, help and config key); every option of every command says what it does."""
    train, bench = _options(_subcommand("train")), _options(_subcommand("bench-sampler"))
    for flag in ("--env", "--sampler", "--batch-B", "--batch-T", "--n-workers", "--plugin"):
        assert bench[flag] == train[flag]
    for command in ("train", "eval", "export", "bench-sampler", "check-env", "sweep", "benchmark"):
        for flag, (text, *_) in _options(_subcommand(command)).items():
            assert len(text) > 10, f"rlfw {command} {flag} has no help"


# -- every setting reachable, runs extendable, the best policy kept --------------------
def test_set_assigns_typed_values_to_any_field():
    from rlfw.cli import config_from_args, make_parser

    args = make_parser().parse_args(
        [
            "train",
            "--env",
            "ALE/Pong-v5",
            "--sampler",
            "cpu",
            "--set",
            "ppo.epochs=4",
            "--set",
            "ppo.gamma=0.95",
            "--set",
            "atari.sticky_action_prob=0.25",
            "--set",
            "model=mlp",
            "--set",
            "hidden=32,32",
            "--set",
            "schedule.stop_at_return=none",
            "--set",
            "ppo.normalize_advantage=false",
            "--set",
            "n_workers=2",
        ]
    )
    config = config_from_args(args)
    assert config.ppo.epochs == 4 and isinstance(config.ppo.epochs, int)
    assert config.ppo.gamma == 0.95 and config.atari.sticky_action_prob == 0.25
    assert config.hidden == (32, 32) and config.schedule.stop_at_return is None
    assert config.ppo.normalize_advantage is False and config.n_workers == 2


def test_set_algo_or_env_picks_the_preset_as_the_flag_does():
    """A sweep's ``--grid algo=a2c,impala`` passes ``--set algo=...``: the run must be the
    algorithm's own (its preset's batch shape and settings), not PPO's with a new name."""
    from rlfw.cli import config_from_args, make_parser

    def config(*argv):
        return config_from_args(make_parser().parse_args(["train", *argv]))

    for algo in ("a2c", "impala"):
        by_set = config("--env", "Acrobot-v1", "--set", f"algo={algo}")
        assert by_set == config("--env", "Acrobot-v1", "--algo", algo)
        assert (by_set.batch_B, by_set.batch_T) == (8, 5)  # A2C's preset, not PPO's 16 x 256
    assert config("--set", "env=Acrobot-v1") == config("--env", "Acrobot-v1")


@pytest.mark.parametrize(
    "assignment,message",
    [
        ("ppo.epoch=4", "unknown config key 'ppo.epoch'; ppo's keys: ppo.learning_rate,"),
        ("nonsense=1", "unknown config key 'nonsense'"),
        ("ppo.epochs=four", "config key 'ppo.epochs' takes an integer, got 'four'"),
        ("ppo.epochs=4.5", "config key 'ppo.epochs' takes an integer, got '4.5'"),
        ("ppo.gamma=high", "config key 'ppo.gamma' takes a number, got 'high'"),
        ("ppo.anneal_lr=maybe", "config key 'ppo.anneal_lr' takes true or false, got 'maybe'"),
        ("ppo", "--set takes KEY=VALUE, got 'ppo'"),
        ("ppo=1", "config key 'ppo' is a group; set one of its fields: ppo.learning_rate"),
        # another algorithm's group: the run would ignore it, silently
        (
            "a2c.gamma=0.9",
            "config key 'a2c.gamma' belongs to algo 'a2c', but this run trains "
            "'ppo' and would ignore it: set ppo.gamma instead",
        ),
        (
            "dqn.tau=0.5",
            "config key 'dqn.tau' belongs to algo 'dqn', but this run trains 'ppo' "
            "and would ignore it: algo 'ppo' has no 'tau'",
        ),
        (
            "atari.frame_skip=2",
            "config key 'atari.frame_skip' is for Atari games (ALE/<Game>-v5), "
            "but this run's env is 'CartPole-v1', which would ignore it",
        ),
        (
            "n_workers=2",
            "config key 'n_workers' is for samplers with worker processes (cpu, gpu, "
            "alternating, native",
        ),
        ("tune_seconds=5", "config key 'tune_seconds' is the trial length of tune_workers=true"),
        (
            "obs_clip=5",
            "config key 'obs_clip' clips normalized observations, and this run has "
            "normalize_obs=false",
        ),
        (
            "ppo.reward_clip=5",
            "config key 'ppo.reward_clip' is read only with "
            "ppo.normalize_reward=true, which this run does not set",
        ),
        ("ppo.optimizer_eps=0", "PPOConfig.optimizer_eps = 0.0 is invalid: must be > 0"),
        (
            "n_eval_workers=8",
            "n_eval_workers=8 exceeds n_eval_envs=4: each evaluation worker "
            "steps at least one env, so this run would start only 4",
        ),
        (
            "world_size=2",
            "config key 'world_size' is recorded, not chosen: the ranks are "
            "torchrun's (torchrun --nproc-per-node N -m rlfw train ...)",
        ),
    ],
)
def test_set_errors_name_the_key_and_what_is_allowed(assignment, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["train", "--set", assignment, "--log-dir", str(tmp_path / "run")])
    assert exc.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["--set", "log_std_init=-1"],
            "config key 'log_std_init' would be ignored by this run (ppo on CartPole-v1): it is "
            "the "
            "initial log-std of Gaussian policies, and CartPole-v1's actions Discrete(2) are not "
            "a Box",
        ),
        (
            ["--env", "MinAtar/Breakout-v1", "--set", "hidden=256"],
            "config key 'hidden' would be ignored by this run (ppo on MinAtar/Breakout-v1): with "
            "model='auto' the network for MinAtar/Breakout-v1's [4, 10, 10] images is the CNN for "
            "their size, whose layers are fixed; hidden and activation shape MLPs (model=mlp)",
        ),
        (
            ["--algo", "r2d1", "--env", "MinAtar/Breakout-v1", "--set", "activation=relu"],
            "config key 'activation' would be ignored by this run (r2d1 on MinAtar/Breakout-v1): "
            "r2d1's Q-network uses ReLU",
        ),
        (
            ["--algo", "dqn", "--set", "activation=tanh"],
            "dqn's Q-network uses ReLU; activation is for ppo's and a2c's MLPs",
        ),
        (
            ["--algo", "c51", "--set", "ortho_init=false"],
            "config key 'ortho_init' would be ignored by this run (c51 on CartPole-v1)",
        ),
        (
            ["--set", "recurrent=gru", "--set", "ortho_init=false"],
            "it is for the feed-forward MLP actor-critic; CNN and recurrent networks are always "
            "initialized orthogonally",
        ),
        (
            ["--set", "sde_sample_freq=4"],
            "config key 'sde_sample_freq' would be ignored by this run (ppo on CartPole-v1): it "
            "turns "
            "on gSDE exploration for Box actions, and CartPole-v1's actions Discrete(2) are not a "
            "Box",
        ),
        (
            ["--env", "Pendulum-v1", "--set", "recurrent=lstm", "--set", "sde_sample_freq=4"],
            "gSDE is for the feed-forward MLP actor-critic; CNN and recurrent networks explore "
            "with "
            "a plain Gaussian",
        ),
        (
            ["--algo", "dqn", "--set", "sde_sample_freq=4"],
            "dqn has no Gaussian policy to explore with gSDE",
        ),
        (
            ["--set", "hidden=64,0"],
            "hidden must list positive layer widths (or be empty: no hidden layer), got [64, 0]",
        ),
        (["--seed", "-1"], "seed must be an integer from 0 to 2**32 - 1, got -1"),
        (
            ["--algo", "dqn", "--set", "model=conv"],
            "model 'conv' unknown; choose from ('auto', 'mlp', 'cnn')",
        ),
        (
            ["--algo", "dqn", "--set", "dqn.priority_beta=0.5"],
            "config key 'dqn.priority_beta' is read only with dqn.prioritized=true",
        ),
        (
            ["--algo", "rainbow", "--set", "rainbow.priority_beta=1.5"],
            "DQNConfig.priority_beta = 1.5 is invalid: must be in [0, 1]",
        ),
        (
            ["--algo", "dqn", "--set", "dqn.epsilon_final=2"],
            "DQNConfig.epsilon_final = 2.0 is invalid: must be in [0, 1]",
        ),
        (
            ["--algo", "dqn", "--set", "dqn.huber_delta=0"],
            "DQNConfig.huber_delta = 0.0 is invalid: must be > 0",
        ),
        # what acts at evaluations, with evaluation off
        (
            ["--set", "schedule.eval_every=none", "--stop-at-return", "100"],
            "stop_at_return is checked at evaluations, and eval_every is None (evaluation off): "
            "set "
            "eval_every, or stop_at_return=none",
        ),
        (
            ["--set", "schedule.eval_every=none", "--video-every", "1000"],
            "video_every records at evaluations, and eval_every is None",
        ),
    ],
)
def test_settings_the_run_would_not_read_are_refused(argv, message, capsys, tmp_path):
    """Whether a network setting is read depends on the algorithm and on the env's spaces
    (an image gets the fixed CNN, a Discrete action no Gaussian), a schedule's on whether
    there are evaluations: one the run would ignore, or a bad value, is an error before
    anything starts."""
    with pytest.raises(SystemExit) as exc:
        main(["train", *argv, "--log-dir", str(tmp_path / "run")])
    assert exc.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["--env", "Pendulum-v1", "--set", "log_std_init=-1", "--set", "sde_sample_freq=0"],
        ["--env", "Pendulum-v1", "--set", "log_std_init=-1"],  # the preset's gSDE
        [
            "--env",
            "MinAtar/Breakout-v1",
            "--model",
            "mlp",
            "--set",
            "hidden=32",
            "--set",
            "activation=relu",
            "--set",
            "ortho_init=false",
        ],
        ["--algo", "dqn", "--set", "hidden=32"],
        ["--algo", "r2d1", "--set", "hidden=32"],
    ],
)
def test_model_settings_are_taken_where_the_network_reads_them(argv):
    from rlfw.cli import config_from_args, make_parser
    from rlfw.envs import EnvSpaces
    from rlfw.registry import ALGOS

    config = config_from_args(make_parser().parse_args(["train", *argv]))
    agent = ALGOS.get(config.algo).build_agent(config, EnvSpaces.of(config.env_factory()))
    weights = agent.model.state_dict()
    if config.log_std_init:
        (log_std,) = [w for name, w in weights.items() if name.endswith("log_std")]
        assert log_std.eq(-1.0).all()
        # gSDE: one log-std per (last hidden feature, action), the noise held 4 steps
        assert log_std.shape == ((64, 1) if config.sde_sample_freq else (1,))
        assert agent.noise_hold == max(config.sde_sample_freq, 1)
    if config.hidden == (32,):
        assert any(w.shape[0] == 32 for w in weights.values() if w.ndim == 2), weights.keys()


def test_a_script_s_setting_of_another_algorithm_is_refused_as_the_cli_s():
    from rlfw.launch.config import RunConfig

    with pytest.raises(
        ValueError,
        match="belongs to algo 'dqn', but this run trains 'rainbow' .* set rainbow.n_step instead",
    ):
        RunConfig.for_env("CartPole-v1", "rainbow", dqn={"n_step": 5})
    assert RunConfig.for_env("CartPole-v1", "rainbow", rainbow={"n_step": 5}).rainbow.n_step == 5


@pytest.mark.integration
def test_config_file_is_the_starting_point_and_flags_apply_on_top(tmp_path, capsys):
    import json

    run = tmp_path / "first"
    assert (
        main(["train", "--algo", "a2c", "--set", "a2c.gamma=0.9", "--log-dir", str(run), *FAST])
        == 0
    )
    second = tmp_path / "second"
    assert (
        main(
            [
                "train",
                "--config",
                str(run / "config.json"),
                "--seed",
                "3",
                "--log-dir",
                str(second),
                "--no-progress",
            ]
        )
        == 0
    )
    saved = json.loads((second / "config.json").read_text())
    assert saved["algo"] == "a2c" and saved["a2c"]["gamma"] == 0.9 and saved["seed"] == 3
    assert saved["schedule"]["n_steps"] == 512  # from the file, not the preset's 120k
    capsys.readouterr()


def test_resume_with_steps_extends_a_finished_run(tmp_path, capsys):
    run = str(tmp_path / "run")
    assert main(["train", "--algo", "a2c", "--log-dir", run, *FAST]) == 0
    assert "done after 520 env steps" in capsys.readouterr().out
    assert main(["train", "--resume", run, "--steps", "1000", "--no-progress"]) == 0
    assert "done after 1000 env steps" in capsys.readouterr().out
    from rlfw.runfolder.checkpoint import list_checkpoints

    assert list_checkpoints(run)[-1].endswith("ckpt_000000001000.pt")


def test_best_checkpoint_is_kept_and_evaluated(tmp_path, capsys):

    run = tmp_path / "run"
    assert main(["train", "--algo", "a2c", "--log-dir", str(run), *FAST]) == 0
    capsys.readouterr()
    best = load_checkpoint(str(run / "checkpoints" / "best.pt"))
    newest = load_checkpoint(sorted(str(p) for p in (run / "checkpoints").glob("ckpt_*.pt"))[-1])
    assert best["eval_return"] == max(m for _, m in newest["result"]["eval_history"])
    assert best["eval_return"] == newest["result"]["best_eval_return"]
    assert main(["eval", str(run), "--best", "--episodes", "2"]) == 0
    assert "over 2 episodes" in capsys.readouterr().out


def test_interrupted_summary_without_evaluation_says_so(tmp_path, capsys, monkeypatch):
    from rlfw.runners.sync import SyncRunner

    def interrupt(self, itr):
        raise KeyboardInterrupt

    monkeypatch.setattr(SyncRunner, "_iteration", interrupt)
    assert main(["train", "--algo", "a2c", "--log-dir", str(tmp_path / "run"), *FAST]) == 130
    out = capsys.readouterr().out
    assert "no evaluation yet" in out and "nan" not in out and "inf" not in out


@pytest.mark.parametrize("device", ["cuda", "cuda:99", "tpu"])
def test_unavailable_device_is_a_clear_error_before_any_work(device, capsys, tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on a CPU machine
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(SystemExit) as exc:
        main(["train", "--device", device, "--log-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and not (tmp_path / "run").exists()
    assert f"device {device!r} is not" in err and "available: cpu" in err


@pytest.mark.integration
def test_an_installed_rlfw_plugin_loads_without_a_flag(tmp_path):
    """A package that declares an ``rlfw.plugins`` entry point is the user's choice: its
    registrations are there for every command, and the run records it."""
    import json
    import os

    site = tmp_path / "site"
    (site / "myplug-0.1.dist-info").mkdir(parents=True)
    (site / "myplug-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: myplug\nVersion: 0.1\n"
    )
    (site / "myplug-0.1.dist-info" / "entry_points.txt").write_text(
        "[rlfw.plugins]\nmine = myplug\n"
    )
    (site / "myplug.py").write_text(
        "import gymnasium\n"
        "gymnasium.register('MyPlug-v0', entry_point='gymnasium.envs.classic_control:"
        "CartPoleEnv', max_episode_steps=200)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = tmp_path / "run"
    for argv in (
        ["train", "--env", "MyPlug-v0", "--steps", "256", "--no-progress", "--log-dir", str(run)],
        ["eval", str(run), "--episodes", "1"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "rlfw", *argv],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((run / "config.json").read_text())["plugins"] == ["myplug"]
