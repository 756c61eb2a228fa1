"""Samplers, algorithms and runners are declared once (rlfw/registry.py): validation, CLI
choices, errors and the docs' table come from there, and a user registers their own from a
script — here, from this file, outside the package — and trains with them."""

import csv
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from toy_extensions import VPG, InterleavedSampler, VPGConfig

import rlfw
from rlfw.registry import ALGOS, RUNNERS, SAMPLERS, sampler_table

PLUGIN_DIR = Path(__file__).parent / "plugins"


def test_a_sampler_and_an_algorithm_registered_outside_rlfw_train_end_to_end(tmp_path):
    config = rlfw.RunConfig.for_env(
        "CartPole-v1", algo="vpg", steps=3200, sampler="interleaved", vpg={"learning_rate": 3e-3}
    )
    assert config.vpg == VPGConfig(learning_rate=3e-3)
    assert (config.batch_B, config.batch_T, config.hidden) == (8, 200, (32,))  # its preset
    with rlfw.build_runner(config, str(tmp_path / "run"), progress=False, stdout=False) as runner:
        result = runner.train()
    assert isinstance(runner.sampler, InterleavedSampler) and isinstance(runner.algo, VPG)
    assert result.iterations == 2
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["algo"] == "vpg" and saved["sampler"] == "interleaved"
    assert saved["vpg"]["learning_rate"] == 3e-3
    with open(tmp_path / "run" / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows[-1]["train/value_loss"] != ""
    # The saved config rebuilds the same run (e.g. for --resume).
    reloaded = rlfw.RunConfig.load(str(tmp_path / "run"))
    assert reloaded.vpg == config.vpg and reloaded.to_dict() == config.to_dict()


@pytest.mark.integration
def test_the_cli_loads_a_plugin_and_trains_its_sampler_and_algorithm(tmp_path):
    """A fresh interpreter that has never seen the plugin: ``--plugin`` alone brings the
    sampler, the algorithm and its preset; eval needs the plugin named again."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(PLUGIN_DIR), os.environ.get("PYTHONPATH", "")]),
    }
    run = tmp_path / "run"
    train = [
        sys.executable,
        "-m",
        "rlfw",
        "train",
        "--plugin",
        "toy_extensions",
        "--algo",
        "vpg",
        "--sampler",
        "interleaved",
        "--n-workers",
        "2",
        "--steps",
        "1600",
        "--set",
        "vpg.gamma=0.9",
        "--no-progress",
        "--log-dir",
        str(run),
    ]
    done = subprocess.run(train, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    saved = json.loads((run / "config.json").read_text())
    assert (saved["algo"], saved["sampler"], saved["vpg"]["gamma"]) == ("vpg", "interleaved", 0.9)
    assert saved["plugins"] == ["toy_extensions"] and saved["batch_T"] == 200
    evaluate = [sys.executable, "-m", "rlfw", "eval", str(run), "--episodes", "2"]
    refused = subprocess.run(evaluate, env=env, capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "--plugin toy_extensions" in refused.stderr
    done = subprocess.run(
        evaluate + ["--plugin", "toy_extensions"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "return" in done.stdout, done.stderr


# A user's module that registers an env under its own namespace with a class (not a
# 'module:Class' string gymnasium would import by itself): only a process that imported the
# module knows the id.
_USER_ENV_PLUGIN = """
import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class Mine(CartPoleEnv):
    pass


gym.register("mine/Mine-v0", entry_point=Mine, max_episode_steps=100)
"""


@pytest.mark.integration
@pytest.mark.parametrize(
    "flags",
    [
        ["--sampler", "serial", "--set", "n_eval_workers=2"],  # evaluation workers
        ["--sampler", "cpu"],
        ["--sampler", "gpu"],
        ["--sampler", "alternating"],
        ["--sampler", "queue"],
        ["--sampler", "cpu", "--runner", "concurrent"],
        ["--sampler", "cpu", "--runner", "async"],
    ],
    ids=["eval-workers", "cpu", "gpu", "alternating", "queue", "concurrent", "async"],
)
def test_an_env_from_a_plugin_trains_in_every_process_the_run_starts(tmp_path, flags):
    """Worker processes (and the async sampler process, and evaluation workers) import the
    run's plugins before making an env, so an id only the plugin registers resolves there."""
    (tmp_path / "mymod.py").write_text(_USER_ENV_PLUGIN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    run = tmp_path / "run"
    workers = [] if "serial" in flags else ["--n-workers", "2"]
    argv = ["--plugin", "mymod", "--env", "mine/Mine-v0", *workers, *flags]
    train = [sys.executable, "-m", "rlfw", "train", *argv, "--steps", "1024", "--no-progress"]
    done = subprocess.run(
        [*train, "--log-dir", str(run)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "done after 1024 env steps" in done.stdout
    assert json.loads((run / "config.json").read_text())["plugins"] == ["mymod"]


def test_unknown_names_are_refused_naming_what_is_registered():
    for kind, name, registry in (
        ("sampler", "warp", SAMPLERS),
        ("algorithm", "apex", ALGOS),
        ("runner", "hyper", RUNNERS),
    ):
        with pytest.raises(
            ValueError,
            match=rf"{kind} '{name}' unknown; choose from "
            rf"\(.*'{registry.names()[-1]}'\)",
        ):
            registry.get(name)
    assert "interleaved" in SAMPLERS.names() and "vpg" in ALGOS.names()
    with pytest.raises(ValueError, match="sampler 'interleaved' is registered already"):
        rlfw.register_sampler("interleaved", InterleavedSampler)


def test_what_a_spec_says_replaces_lists_of_names():
    assert [a.name for a in ALGOS if a.uses_replay] == [
        "dqn",
        "c51",
        "rainbow",
        "r2d1",
        "sac",
        "td3",
        "ddpg",
    ]
    assert {s.name: s.worker_groups for s in SAMPLERS if s.worker_groups > 1} == {"alternating": 2}
    assert SAMPLERS.get("interleaved").has_workers
    # queue's constructor is (*args, max_batch, ..., **kwargs): n_workers is its base's
    assert [s.name for s in SAMPLERS if s.has_workers] == [
        "cpu",
        "gpu",
        "alternating",
        "native",
        "queue",
        "interleaved",
    ]


def test_the_docs_table_of_samplers_is_the_registry_s():
    docs = (Path(__file__).parents[1] / "docs" / "samplers.md").read_text()
    shipped = [s for s in SAMPLERS if s.cls.__module__.startswith("rlfw.")]
    assert sampler_table(shipped) in docs, (
        "regenerate the table: python -c 'from rlfw.registry "
        "import sampler_table; print(sampler_table())'"
    )
    for spec in shipped:
        assert f"`{spec.name}`" in docs


# Each built-in algorithm on the smallest env of its action space, learning from its second
# batch (a replay learner's warm-up shortened to fit the 256-step run).
_SMALL_RUNS = {
    "ppo": ("CartPole-v1", {}),
    "a2c": ("CartPole-v1", {}),
    "appo": ("CartPole-v1", {}),
    "impala": ("CartPole-v1", {}),
    "pqn": ("CartPole-v1", {}),
    "dqn": ("CartPole-v1", {"learning_starts": 64}),
    "c51": ("CartPole-v1", {"learning_starts": 64}),
    "rainbow": ("CartPole-v1", {"learning_starts": 64}),
    "r2d1": ("CartPole-v1", {"learning_starts": 64, "burn_in": 4, "learn_steps": 8, "period": 4}),
    "sac": ("Pendulum-v1", {"learning_starts": 64}),
    "td3": ("Pendulum-v1", {"learning_starts": 64}),
    "ddpg": ("Pendulum-v1", {"learning_starts": 64}),
}


@pytest.mark.integration
@pytest.mark.parametrize("algo", list(_SMALL_RUNS))
def test_every_algorithm_saves_its_settings_under_its_own_key_and_resumes(tmp_path, algo):
    """config.json keeps the run's algorithm's settings under the algorithm's name (and no
    other algorithm's); the saved run resumes to a longer budget and finishes."""
    env, own = _SMALL_RUNS[algo]
    config = rlfw.RunConfig.for_env(env, algo, steps=256, batch_B=4, hidden=(16,))
    config.batch_T = 16
    config.schedule.eval_every = None
    setattr(config, algo, dataclasses.replace(config.algo_config(), **own))
    run = str(tmp_path / "run")
    with rlfw.build_runner(config, run, progress=False, stdout=False) as runner:
        runner.train()
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert {name for name in ALGOS.names() if name in saved} == {algo}
    assert saved[algo] == dataclasses.asdict(config.algo_config())
    assert isinstance(runner.algo, ALGOS.get(algo).algo_cls)
    resumed_config = rlfw.RunConfig.load(run)
    assert resumed_config == config
    resumed_config.schedule.n_steps = 512
    with rlfw.build_runner(
        resumed_config, run, resume=True, progress=False, stdout=False
    ) as resumed:
        result = resumed.train()
    assert result.env_steps == 512 and result.iterations == 8
