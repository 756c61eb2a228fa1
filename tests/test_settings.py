"""Each setting is declared once: its type, default, help (the docstring under it) and flag
(``Annotated[..., Flag(...)]``) give the CLI flag, ``--set`` typing, ``--help-config`` and
the reference page."""

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import pytest

from rlfw.algos.pg.spec import build_actor_critic
from rlfw.cli import given_flags, main, make_parser
from rlfw.launch.flags import ALGO_FIELD, config_flags
from rlfw.launch.reference import help_config, key_docs, reference_markdown
from rlfw.registry import ALGOS, register_algo
from rlfw.utils.settings import Flag, settings_of, type_name

ROOT = Path(__file__).parents[1]


def test_every_key_of_every_algorithm_has_help():
    missing = [doc.key for doc in key_docs(list(ALGOS.names())) if not doc.help.strip()]
    assert not missing, f"config keys without a docstring: {missing}"


@dataclass
class KnobConfig:
    """An algorithm's settings, as a plugin declares them."""

    learning_rate: float = 1e-3
    """Step size."""
    knob: Annotated[int, Flag("--toy-knob")] = 3
    """How far the knob is turned."""
    sharp: Annotated[bool, Flag("--toy-sharp", const=True)] = False

    def validate(self) -> None:
        pass


def test_a_field_s_declaration_gives_its_type_default_help_and_flag():
    knob, sharp = settings_of(KnobConfig)[1:]
    assert (knob.type, knob.default, knob.help) == (int, 3, "How far the knob is turned.")
    assert [f.names for f in knob.flags] == [("--toy-knob",)] and knob.flags[0].takes_value
    assert sharp.help == "" and sharp.flags[0].const is True
    assert type_name(Annotated[int | None, Flag("--x")].__origin__) == "int | None"


@pytest.fixture
def knob_algo():
    from rlfw.algos import PPO

    register_algo("knob", PPO, KnobConfig, build_actor_critic)
    yield
    ALGOS.remove("knob")


def test_a_new_setting_is_one_declaration_flag_help_and_reference(knob_algo):
    """Registering an algorithm whose config declares a flag is all it takes."""
    args = make_parser().parse_args(
        ["train", "--algo", "knob", "--toy-knob", "7", "--toy-sharp", "--lr", "0.5"]
    )
    assert given_flags(args) == [
        ("--lr", ALGO_FIELD + "learning_rate", 0.5),
        ("--toy-knob", ALGO_FIELD + "knob", 7),
        ("--toy-sharp", ALGO_FIELD + "sharp", True),
    ]
    assert "How far the knob is turned. [<algo>.knob]" in " ".join(
        make_parser()._subparsers._group_actions[0].choices["train"].format_help().split()
    )
    assert "knob.knob: int = 3  [--toy-knob]" in help_config("knob", "CartPole-v1")
    assert (
        "| `knob.knob` | `int` | `3` | `--toy-knob` | How far the knob is turned. |"
        in reference_markdown()
    )
    with pytest.raises(SystemExit):  # typed from the field: an int
        make_parser().parse_args(["train", "--toy-knob", "many"])


def test_flags_set_the_declared_keys_constants_and_choices():
    args = make_parser().parse_args(
        [
            "train",
            "--n-envs",
            "16",
            "--eval-sampled",
            "--compile",
            "auto",
            "--eval-every",
            "none",
            "--sticky-actions",
            "0.25",
            "--wandb",
        ]
    )
    assert given_flags(args) == [
        ("--batch-B", "batch_B", 16),  # its first name
        ("--eval-every", "schedule.eval_every", None),
        ("--eval-sampled", "schedule.eval_greedy", False),
        ("--sticky-actions", "atari.sticky_action_prob", 0.25),
        ("--wandb", "wandb.enabled", True),
        ("--compile", ALGO_FIELD + "compile", None),
    ]
    with pytest.raises(SystemExit):
        make_parser().parse_args(["train", "--eval-greedy", "--eval-sampled"])


def test_every_flag_sets_a_key_a_run_has_and_no_flag_is_declared_twice():
    from rlfw.launch.config import config_keys

    names = [name for spec in config_flags() for name in spec.flag.names]
    assert len(names) == len(set(names)), "a flag declared twice"
    keys = set(config_keys())
    for spec in config_flags():
        if spec.key.startswith(ALGO_FIELD):
            field = spec.key.removeprefix(ALGO_FIELD)
            assert all(
                f"{algo}.{field}" in {d.key for d in key_docs([algo])} for algo in spec.algos
            ), spec
        else:
            assert spec.key in keys, spec


def test_help_config_lists_every_key_with_its_preset(capsys):
    assert main(["train", "--help-config", "--algo", "ppo", "--env", "CartPole-v1"]) == 0
    out = capsys.readouterr().out
    keys = [doc.key for doc in key_docs(["ppo"])]
    for key in keys:
        assert f" {key}: " in out, key
    assert "* ppo.epochs: int = 20  (default 10)" in out  # the CartPole preset's
    assert "dqn." not in out  # another algorithm's keys are not this run's


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--algo", "nope"], "algorithm 'nope' unknown; choose from"),
        (["--env", "Nope-v9"], "unknown env id 'Nope-v9'"),
    ],
)
def test_help_config_for_an_unknown_algorithm_or_env_is_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", "--help-config", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.integration
def test_a_plugin_s_flag_is_on_the_command_line_it_names(tmp_path):
    import json
    import os
    import subprocess
    import sys

    plugins = Path(__file__).parent / "callback_plugins"
    env = {**os.environ, "PYTHONPATH": str(plugins)}
    run = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlfw",
            "train",
            "--plugin",
            "flagged_algo",
            "--algo",
            "flagged",
            "--flagged-knob",
            "5",
            "--steps",
            "256",
            "--no-progress",
            "--log-dir",
            str(run),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((run / "config.json").read_text())["flagged"]["knob"] == 5
    done = subprocess.run(
        [sys.executable, "-m", "rlfw", "train", "--flagged-knob", "5"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and "unrecognized arguments: --flagged-knob" in done.stderr


def test_presets_are_tables_of_entries_each_with_a_one_line_source():
    from rlfw.algos.dqn.presets import DQN_PRESETS
    from rlfw.algos.pg.presets import A2C_PRESETS, PPO_PRESETS
    from rlfw.algos.qpg.presets import DDPG_PRESETS, SAC_PRESETS, TD3_PRESETS
    from rlfw.launch.config import RunConfig, apply_overrides

    tables = (
        ("ppo", PPO_PRESETS),
        ("a2c", A2C_PRESETS),
        ("dqn", DQN_PRESETS),
        ("sac", SAC_PRESETS),
        ("td3", TD3_PRESETS),
        ("ddpg", DDPG_PRESETS),
    )
    for algo, table in tables:
        for entry in table:
            assert entry.source and "\n" not in entry.source and len(entry.source) <= 100
            apply_overrides(RunConfig(algo=algo), entry.settings)  # every key exists, typed
