"""Dynamic scheduling: the hill-climb picks the best worker count and the run keeps it."""

import json

import pytest

from rlfw.envs import EnvFactory
from rlfw.launch.build import build_runner, tune_workers
from rlfw.launch.config import RunConfig
from rlfw.samplers.machinery.scheduling import Trial, hill_climb, worker_candidates
from rlfw.testing import CountingAgent, SleepyEnv


def test_hill_climb_stops_past_the_peak_and_keeps_the_best():
    rates = {1: 100.0, 2: 180.0, 4: 150.0, 8: 400.0}  # 8 is never tried: 4 was worse
    best, trials = hill_climb(rates.__getitem__, [1, 2, 4, 8])
    assert best == 2
    assert trials == [Trial(1, 100.0), Trial(2, 180.0), Trial(4, 150.0)]


def test_candidates_split_the_envs_evenly():
    assert worker_candidates(8, cap=4) == [1, 2, 4]
    assert worker_candidates(12, groups=2, cap=8) == [2, 4, 6]
    with pytest.raises(ValueError, match="batch_B=3.*multiples of 2"):
        worker_candidates(3, groups=2, cap=4)


def test_with_a_known_step_cost_the_tuner_picks_the_best_worker_count(tmp_path):
    # Each step waits 10 ms: 1 worker steps 4 envs in 40 ms, 2 in 20 ms, 4 in 10 ms.
    factory = EnvFactory("sleepy", entry=SleepyEnv, kwargs=(("step_s", 0.01),))
    config = RunConfig(
        env="CartPole-v1", sampler="cpu", batch_B=4, batch_T=8, tune_workers=True, tune_seconds=0.6
    )
    lines = []
    tune_workers(config, factory, CountingAgent(), str(tmp_path), say=lines.append)
    assert config.n_workers == 4 and not config.tune_workers
    saved = json.loads((tmp_path / "tuning.json").read_text())
    assert saved["chosen"] == {"n_workers": 4}
    assert [t["n_workers"] for t in saved["trials"]] == [1, 2, 4]
    rates = [t["steps_per_second"] for t in saved["trials"]]
    assert rates[0] < rates[1] < rates[2]
    assert lines[-1] == "rlfw: tuning n_workers: chose 4 (of [1, 2, 4] tried)"


def test_the_choice_is_saved_in_config_json_and_a_resumed_run_uses_it(tmp_path):
    config = RunConfig(sampler="cpu", batch_B=2, batch_T=16, tune_workers=True, tune_seconds=0.3)
    config.schedule.n_steps, config.schedule.eval_every = 64, None
    runner = build_runner(config, str(tmp_path / "run"), progress=False, stdout=False)
    with runner:
        runner.train()
    saved = RunConfig.load(str(tmp_path / "run"))
    assert saved.n_workers in (1, 2) and saved.tune_workers is False
    assert (
        saved.n_workers
        == json.loads((tmp_path / "run" / "tuning.json").read_text())["chosen"]["n_workers"]
    )


def test_auto_workers_with_the_serial_sampler_is_refused():
    with pytest.raises(ValueError, match="n_workers 'auto' with sampler 'serial'"):
        RunConfig(sampler="serial", tune_workers=True).validate()
