"""Evaluation that follows the Atari protocols and stays bounded."""

import csv
import time

from rlfw.envs import EnvFactory
from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.runners import RunSchedule
from rlfw.samplers import EvalLimits, SerialSampler
from rlfw.testing import ConstantActionAgent, CountingAgent, CountingEnv


def test_breakout_agent_that_never_presses_fire_finishes_its_evaluation():
    # Training presses FIRE at the start of every life (episodic life + fire reset), so
    # evaluation does too: a NOOP-only policy loses its five lives quickly instead of
    # idling to the 108k-frame cap (27,000 agent steps per episode).
    with SerialSampler(EnvFactory("ALE/Breakout-v5"), 4, 1, seed=0, n_eval_envs=2) as sampler:
        sampler.initialize(ConstantActionAgent(0))
        start = time.monotonic()
        episodes = sampler.evaluate(2, limits=EvalLimits(max_episode_steps=27_000))
        elapsed = time.monotonic() - start
    assert len(episodes) == 2 and not any(e.truncated for e in episodes)
    assert all(e.length < 2_000 for e in episodes), episodes
    assert elapsed < 30


def test_episode_cap_and_budget_cut_episodes_and_say_so():
    with SerialSampler(EnvFactory("ALE/Breakout-v5"), 4, 1, seed=0, n_eval_envs=2) as sampler:
        sampler.initialize(ConstantActionAgent(0))
        capped = sampler.evaluate(4, limits=EvalLimits(max_episode_steps=50))
        budgeted = sampler.evaluate(4, limits=EvalLimits(max_steps=60))
    assert len(capped) == 4 and all(e.truncated and e.length == 50 for e in capped)
    # 60 agent steps over 2 envs: both running episodes are cut at 30 steps, none finishes.
    assert [(e.truncated, e.length) for e in budgeted] == [(True, 30), (True, 30)]


def test_counting_env_episodes_are_whole_unless_cut():
    factory = EnvFactory("counting", entry=CountingEnv, kwargs=(("lengths", (3, 9)),))
    with SerialSampler(factory, 4, 1, seed=0, n_eval_envs=1) as sampler:
        sampler.initialize(CountingAgent())
        episodes = sampler.evaluate(2, limits=EvalLimits(max_episode_steps=5))
    # episode 0 lasts 3 steps (whole), episode 1 would last 9 and is cut at 5
    assert [(e.length, e.truncated) for e in episodes] == [(3, False), (5, True)]
    assert episodes[1].ret == 1 + 2 + 3 + 4 + 5


def test_runner_logs_how_many_evaluation_episodes_were_cut(tmp_path):
    config = apply_overrides(RunConfig(algo="a2c"), preset("a2c", "CartPole-v1"))
    config.schedule = RunSchedule(
        n_steps=80, eval_every=40, eval_episodes=3, log_every=40, eval_max_episode_steps=5
    )
    with build_runner(config, str(tmp_path), progress=False, stdout=False) as runner:
        runner.train()
    rows = list(csv.DictReader(open(tmp_path / "progress.csv")))
    # CartPole episodes last > 5 steps: all three are cut, counted, not silently averaged
    assert [float(r["eval/episodes_cut"]) for r in rows] == [3.0, 3.0]
    assert [float(r["eval/episodes"]) for r in rows] == [0.0, 0.0]


def test_atari_presets_evaluate_as_the_literature_does():
    for algo in ("ppo", "a2c"):
        schedule = preset(algo, "ALE/Pong-v5")["schedule"]
        assert schedule["eval_greedy"] is False  # policy-gradient agents sample
        assert schedule["eval_max_episode_steps"] == 27_000 and schedule["eval_max_steps"]
    dqn = preset("dqn", "ALE/Pong-v5")
    assert dqn["schedule"]["eval_greedy"] is True and dqn["dqn"]["eval_epsilon"] == 0.05
    assert preset("ppo", "CartPole-v1")["schedule"].get("eval_greedy", True) is True


def test_evaluation_in_worker_processes_equals_the_in_process_one():
    from conftest import children

    factory = EnvFactory("counting", entry=CountingEnv, kwargs=(("lengths", (3, 9, 4)),))
    runs = []
    for n_eval_workers in (0, 2):
        with SerialSampler(
            factory, 4, 1, seed=0, n_eval_envs=3, n_eval_workers=n_eval_workers
        ) as sampler:
            sampler.initialize(CountingAgent())
            runs.append(
                [
                    sampler.evaluate(5, limits=EvalLimits(max_episode_steps=6)),
                    sampler.evaluate(4, limits=EvalLimits(max_steps=10)),
                ]
            )
    assert runs[0] == runs[1]
    assert any(e.truncated for e in runs[0][0]) and any(not e.truncated for e in runs[0][0])
    assert children() == []


def test_atari_runs_evaluate_in_their_own_processes():
    from rlfw.launch.build import build_sampler

    config = apply_overrides(
        RunConfig(algo="ppo", env="ALE/Pong-v5", sampler="cpu", n_workers=2),
        preset("ppo", "ALE/Pong-v5"),
    )
    assert build_sampler(config, config.env_factory()).n_eval_workers >= 1
    config = apply_overrides(RunConfig(algo="ppo"), preset("ppo", "CartPole-v1"))
    assert build_sampler(config, config.env_factory()).n_eval_workers == 0


def test_evaluation_presses_fire_after_a_lost_life_only_where_training_does():
    from rlfw.envs.atari import FireAfterLifeLoss
    from rlfw.samplers import NativeAtariSampler

    def wrappers(env):
        found = []
        while hasattr(env, "env"):
            found.append(type(env))
            env = env.env
        return found

    factory = EnvFactory("ALE/Breakout-v5")
    assert FireAfterLifeLoss in wrappers(factory(False))  # python path: training resets
    assert FireAfterLifeLoss not in wrappers(factory(True))  # ... and presses FIRE itself
    native = NativeAtariSampler(factory, 4, 2)
    assert FireAfterLifeLoss not in wrappers(native.eval_env_factory(False))
