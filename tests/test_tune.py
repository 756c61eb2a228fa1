"""``rlfw tune``: an Optuna study whose trials are rlfw runs, its search spaces declared
beside each algorithm and checked against the settings, a study that continues."""

import os

import pytest

from rlfw.algos.search_space import Param, parse_param
from rlfw.cli import main
from rlfw.launch.tune import TuneSettings, check_space, counted, open_study, run_study
from rlfw.registry import ALGOS

SMALL = (Param("batch_T", choices=(16, 32)), Param("ppo.learning_rate", 1e-4, 3e-3, log=True))


def _settings(tmp_path, trials):
    return TuneSettings(
        "ppo",
        "CartPole-v1",
        trials,
        1024,
        str(tmp_path / "study"),
        evaluations=2,
        eval_episodes=2,
        startup_trials=1,
        space=SMALL,
    )


def test_a_study_s_trials_are_runs_and_it_continues_to_its_count(tmp_path):
    """Two trials, then the same study asked for three: it adds one, counts none twice,
    and its report names the best trial as a train command."""
    run_study(_settings(tmp_path, 2), progress=False)
    study = run_study(_settings(tmp_path, 3), progress=False)
    assert [t.number for t in study.trials] == [0, 1, 2] and counted(study) == 3
    folder = tmp_path / "study"
    assert sorted(os.listdir(folder / "trials")) == ["trial_0000", "trial_0001", "trial_0002"]
    report = (folder / "README.md").read_text()
    assert "rlfw train --algo ppo --env CartPole-v1" in report and "| trial | return |" in report
    assert (folder / "study.db").exists()
    best = max(study.trials, key=lambda t: t.value)
    assert f"## Best: trial {best.number}" in report
    assert open_study(_settings(tmp_path, 3)).best_trial.number == best.number


def test_set_fixes_a_setting_of_every_trial_and_a_restart_must_give_the_same(tmp_path):
    """``--set recurrent=lstm`` (say): every trial runs with it, the preset snippet holds it
    typed, and the study refuses to continue under other fixed settings."""
    import dataclasses
    import json

    settings = dataclasses.replace(_settings(tmp_path, 1), fixed=(("ppo.epochs", "2"),))
    run_study(settings, progress=False)
    trial = tmp_path / "study" / "trials" / "trial_0000" / "config.json"
    assert json.loads(trial.read_text())["ppo"]["epochs"] == 2
    report = (tmp_path / "study" / "README.md").read_text()
    assert "Every trial with `ppo.epochs=2`." in report and '"ppo.epochs": 2,' in report
    with pytest.raises(ValueError, match=r"ran every trial with --set \['ppo.epochs=2'\]"):
        run_study(dataclasses.replace(settings, fixed=()), progress=False)


def test_workers_draw_their_own_settings_and_the_command_is_the_users_run(tmp_path):
    """Two workers of one study: samplers seeded alike would draw every startup trial
    twice. The best trial's command is the run a user trains: without the study's
    evaluation cadence."""
    import dataclasses

    asked = dataclasses.replace(_settings(tmp_path, 1), study_dir=str(tmp_path / "asked"))
    os.makedirs(asked.study_dir)
    drawn = []
    for worker in (0, 1):
        trial = open_study(asked, worker).ask()
        drawn.append([param.suggest(trial) for param in asked.space])
    assert drawn[0] != drawn[1]
    run_study(_settings(tmp_path, 1), progress=False)
    report = (tmp_path / "study" / "README.md").read_text()
    assert "--seed 0" in report and "schedule." not in report


@pytest.mark.parametrize("algo", [a.name for a in ALGOS if a.search_space])
def test_every_declared_space_is_one_the_runs_accept_at_its_ends(algo):
    settings = TuneSettings(
        algo, "CartPole-v1", 1, 10_000, "unused", space=ALGOS.get(algo).search_space
    )
    check_space(settings)


@pytest.mark.parametrize(
    "space,message",
    [
        ("ppo.no_such=1,2", "unknown config key 'ppo.no_such'"),
        ("ppo.epochs=0,4", "--space ppo.epochs: the value 0 is refused"),
        ("ppo.learning_rate", "is not KEY=LOW:HIGH"),
        ("ppo.learning_rate=0:1e-3:log", "a log range needs low > 0"),
        ("ppo.gamma=0.9:0.99:cubic", "unknown flag 'cubic'"),
        ("ppo.epochs=4 --set ppo.nope=1", "--set ppo.nope=1: unknown config key 'ppo.nope'"),
        ("ppo.epochs=4 --set ppo.epochs", "--set takes KEY=VALUE, got 'ppo.epochs'"),
    ],
)
def test_a_bad_space_is_one_line_and_runs_nothing(space, message, tmp_path, capsys):
    argv = ["tune", "--trials", "1", "--steps", "512", "--study", str(tmp_path / "s")]
    assert _exit_code(argv + ["--space", *space.split()]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "s").exists()


def _exit_code(argv):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code


def test_a_drawn_value_goes_through_its_transform():
    class Draw:  # a trial that draws the low end of every range and the last choice
        def suggest_float(self, name, low, high, *, log=False):
            return low

        def suggest_int(self, name, low, high, *, log=False):
            return low

        def suggest_categorical(self, name, choices):
            return choices[-1]

    trial = Draw()
    assert Param("g", 1e-4, 0.03, log=True, transform="one_minus").suggest(trial) == 1 - 1e-4
    assert Param("b", 5, 12, integer=True, transform="pow2").suggest(trial) == 32
    assert Param("hidden", choices=((64,), (256, 256))).suggest(trial) == (256, 256)
    assert parse_param("hidden=64|64,64").choices == ((64,), (64, 64))
