"""`rlfw benchmark`: the smoke suite end to end against SB3, resumable; the statistics."""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch

from rlfw.bench.report import _goals, binned, iqm_with_ci, markdown, summarize
from rlfw.bench.run import Job, job_settings, plan
from rlfw.bench.suites import SUITES, Entry
from rlfw.bench.zoo import zoo_hyperparams_file, zoo_settings


def benchmark(out, *flags, env=None):
    return subprocess.run(
        [sys.executable, "-m", "rlfw", "benchmark", "--suite", "smoke", "--out", str(out), *flags],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


@pytest.mark.integration
def test_smoke_suite_against_sb3_writes_its_report_and_a_rerun_skips_every_run(tmp_path):
    temp = tmp_path / "system-temp"  # the jobs' temp directory (torch keeps a cache there)
    temp.mkdir()
    out = tmp_path / "out"
    # one entry of the two (the pipeline is the same for each; --entries picks it)
    only = ("--entries", "ppo-CartPole-v1")
    done = benchmark(
        out, "--peer", "sb3", "--max-parallel", "2", *only, env={**os.environ, "TMPDIR": str(temp)}
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not list(temp.glob("SB3-*"))  # SB3 logs in the run folder
    data = json.loads((out / "results.json").read_text())
    ran = [run for run in data["runs"] if run["status"] != "not run"]
    assert len(ran) == 2 * 2 and {r["algo"] for r in ran} == {"ppo"}  # frameworks x seeds
    for run in ran:
        assert run["status"] == "done" and len(run["returns"]) == 20, run
        assert run["final_return"] == pytest.approx(np.mean(run["returns"]))
        assert run["env_steps"] >= run["steps"] and run["wall_s"] > 0
        assert 0 <= run["wait_share"] < 2  # its threads' run-queue wait, per wall second
        job = Job(run["framework"], run["algo"], run["env"], run["steps"], run["seed"])
        assert run["config"] == job_settings(job)  # the settings it ran with
    sb3 = [r for r in data["runs"] if r["framework"] == "sb3" and r["algo"] == "ppo"]
    assert {r["config"]["zoo.n_epochs"] for r in sb3} == {20}  # the zoo's CartPole block
    for entry in data["entries"][:1]:  # the entry that ran
        for fw in ("rlfw", "sb3"):
            s = entry["frameworks"][fw]
            assert s["seeds"] == [0, 1] and s["iqm_low"] <= s["iqm"] <= s["iqm_high"]
        assert "time_ratio" in entry["goals"]
        assert (out / entry["curve_png"]).stat().st_size > 0
    readme = (out / "README.md").read_text()
    assert "## ppo CartPole-v1, 2,048 env steps" in readme
    assert "rl-baselines3-zoo ppo.yml [CartPole-v1]" in readme
    assert "500.0 ± 0.0 (rl-baselines3-zoo benchmark.md" in readme  # the published line

    again = benchmark(out, "--peer", "sb3", *only)
    assert again.returncode == 0 and again.stdout.count("(finished before)") == 4
    assert json.loads((out / "results.json").read_text()) == data


@pytest.mark.integration
def test_minatar_smoke_suite_against_sb3_with_rlfw_s_settings_and_network(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlfw",
            "benchmark",
            "--suite",
            "minatar-smoke",
            "--peer",
            "sb3",
            "--max-parallel",
            "2",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads((tmp_path / "results.json").read_text())
    assert len(data["runs"]) == 2 * 2 and all(r["status"] == "done" for r in data["runs"])
    assert {r["settings"] for r in data["runs"] if r["framework"] == "sb3"} == {
        "rlfw's preset and network (rlfw.bench.same_settings)"
    }
    assert set(data["peer_differences"]) == {"ppo", "dqn"}
    readme = (tmp_path / "README.md").read_text()
    assert "What still differs:" in readme and "MinAtar paper (Young & Tian 2019)" in readme
    # Each finished run left a small record beside the report; without the run folders
    # (another machine, a fresh clone) the report is rebuilt from them and nothing re-runs.
    records = sorted((tmp_path / "records").rglob("*.json"))
    assert len(records) == 4 and all(p.stat().st_size < 100_000 for p in records)
    for run in data["runs"]:  # both frameworks ran rlfw's settings: each record holds them
        job = Job(
            run["framework"],
            run["algo"],
            run["env"],
            run["steps"],
            run["seed"],
            peer_settings="same",
        )
        assert run["config"] == job_settings(job) and run["config"][f"{run['algo']}.gamma"]
    pngs = {p.name: p.read_bytes() for p in tmp_path.glob("curves_*.png")}
    assert len(pngs) == 2
    shutil.rmtree(tmp_path / "runs")
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlfw",
            "benchmark",
            "--suite",
            "minatar-smoke",
            "--peer",
            "sb3",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0 and again.stdout.count("(finished before)") == 4
    # The same report to the byte: the one written as the runs finished was theirs too.
    assert json.loads((tmp_path / "results.json").read_text()) == data
    assert {name: (tmp_path / name).read_bytes() for name in pngs} == pngs


def test_the_sb3_peer_gets_rlfw_s_torso_and_settings():
    from stable_baselines3.common.env_util import make_vec_env

    from rlfw.bench.same_settings import sb3_model
    from rlfw.launch.config import RunConfig
    from rlfw.models.cnn import SmallCNN

    for algo in ("ppo", "dqn"):
        config = RunConfig.for_env("MinAtar/Freeway-v1", algo)
        factory = config.env_factory()
        envs = make_vec_env(lambda: factory(True), n_envs=config.batch_B, seed=0)
        model = sb3_model(config, envs, seed=0)
        extractor = (
            model.policy.features_extractor if algo == "ppo" else model.q_net.features_extractor
        )
        assert isinstance(extractor.torso, SmallCNN)
        own = config.algo_config()
        assert model.learning_rate == own.learning_rate and model.gamma == own.gamma
        if algo == "ppo":
            assert (model.n_steps, model.batch_size, model.n_epochs) == (
                config.batch_T,
                own.minibatch_size,
                own.epochs,
            )
        else:
            assert (
                model.train_freq.frequency,
                model.gradient_steps,
                model.batch_size,
                model.target_update_interval,
            ) == (1, 1, 32, 1_000)
            assert type(model.policy.optimizer).__name__ == "RMSprop"
        envs.close()


@pytest.mark.parametrize("value_clip", [None, 0.2])
@pytest.mark.integration
def test_rlfw_s_ppo_update_is_the_sb3_peer_s_on_the_same_batch(value_clip):
    """The peer is given rlfw's settings; this checks it then learns as rlfw does: from one
    SB3 rollout (episode ends inside it), rlfw's GAE gives SB3's advantages, and rlfw's
    minibatch steps in SB3's minibatch order leave SB3's weights, float rounding apart.

    Run under ATen's scalar kernels (ATEN_CPU_CAPABILITY=default, a fresh interpreter): the
    two sides' vectorized kernels round differently on some CPUs, and Adam turns that
    rounding, in the first conv layer's near-zero gradients, into 5% of a step (seen on an
    AMD EPYC with AVX-512: 1.0e-4 against the 2e-6 bound; 2.2e-7 there under the scalar
    kernels). A different loss still leaves the two whole steps apart."""
    if os.environ.get("ATEN_CPU_CAPABILITY") != "default":
        node = f"{__file__}::test_rlfw_s_ppo_update_is_the_sb3_peer_s_on_the_same_batch"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            + [f"{node}[{value_clip}]"],
            env={**os.environ, "ATEN_CPU_CAPABILITY": "default"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        return
    from rlfw.algos.pg.gae import generalized_advantages
    from rlfw.bench.same_settings import paired_ppo, rlfw_order, rollout_columns
    from rlfw.launch.config import RunConfig

    ppo_settings = (
        {} if value_clip is None else {"value_clip": value_clip, "value_clip_form": "clipped"}
    )
    config = RunConfig.for_env("MinAtar/Breakout-v1", "ppo", ppo=ppo_settings)
    pair = paired_ppo(config, seed=0, n_itr=1)
    envs, model, agent, ppo, layers = pair.envs, pair.model, pair.agent, pair.ppo, pair.layers
    sb3 = model.policy
    ppo._loss = ppo._losses  # eager: compiled kernels round differently (tested elsewhere)
    own = ppo.config
    T, B = config.batch_T, config.batch_B
    _, callback = model._setup_learn(T * B, None)
    model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=T)
    rollout = model.rollout_buffer
    with torch.no_grad():
        last_value = sb3.predict_values(sb3.obs_to_tensor(model._last_obs)[0]).flatten()
    starts = torch.as_tensor(rollout.episode_starts).bool()
    terminated = torch.cat([starts[1:], torch.as_tensor(model._last_episode_starts).bool()[None]])
    assert terminated.any()
    adv, ret = generalized_advantages(
        torch.as_tensor(rollout.rewards),
        torch.as_tensor(rollout.values),
        terminated,
        torch.zeros_like(terminated),
        last_value.expand(T, B),
        own.gamma,
        own.gae_lambda,
    )
    torch.testing.assert_close(adv, torch.as_tensor(rollout.advantages), rtol=0, atol=2e-6)
    torch.testing.assert_close(ret, torch.as_tensor(rollout.returns), rtol=0, atol=2e-6)

    # rlfw's minibatch steps on rlfw's advantages, in the order SB3 draws
    columns = (*rollout_columns(rollout)[:4], adv.flatten(), ret.flatten())
    before = np.random.get_state()
    orders = [np.random.permutation(T * B) for _ in range(own.epochs)]
    np.random.set_state(before)
    model.train()
    agent.train_mode()
    for sb3_order in orders:
        order = rlfw_order(sb3_order, T, B)
        for start in range(0, T * B, own.minibatch_size):
            rows = order[start : start + own.minibatch_size]
            ppo._minibatch_step(*(x[rows] for x in columns), torch.tensor(own.clip))
    # Adam moves each weight by up to the learning rate a step: rounding leaves the two
    # a thousandth of one step apart at most, where a different loss would leave them
    # whole steps apart (the preset's lr 2e-3: 2e-6; measured 1.1e-6 after 32 steps)
    tolerance = 1e-3 * own.learning_rate
    for ours, theirs in layers:
        for (name, x), y in zip(ours.state_dict().items(), theirs.state_dict().values()):
            torch.testing.assert_close(x, y, rtol=0, atol=tolerance, msg=name)
    envs.close()


def test_the_value_loss_form_is_a_listed_difference_only_where_sb3_cannot_take_it():
    from rlfw.bench.same_settings import differences
    from rlfw.launch.config import RunConfig

    def value_form_lines(**ppo):
        config = RunConfig.for_env("MinAtar/Freeway-v1", "ppo", ppo=ppo)
        return [d for d in differences(config) if "value prediction" in d]

    assert value_form_lines(value_clip=0.2, value_clip_form="max")
    assert not value_form_lines(value_clip=0.2, value_clip_form="clipped")  # SB3's own
    assert not value_form_lines(value_clip=None)  # no clipping on either side
    # SB3 has no choice of form: its records leave the key out, rlfw's hold it
    jobs = [
        Job(fw, "ppo", "MinAtar/Freeway-v1", 1_000, 0, peer_settings="same")
        for fw in ("rlfw", "sb3")
    ]
    assert ["ppo.value_clip_form" in job_settings(job) for job in jobs] == [True, False]


def test_unknown_suite_is_named_with_the_choices(capsys):
    from rlfw.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["benchmark", "--suite", "mujoco-2m"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--suite 'mujoco-2m' unknown; choose from" in err
    assert "classic" in err and "smoke" in err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--seeds", "0", "0"], "seeds must be one or more different seeds, got [0, 0]"),
        (["--seeds", "-2"], "seed must be an integer from 0 to 2**32 - 1, got -2"),
        (
            ["--ray-address", "auto"],
            "--ray-address is for --backend ray; this benchmark runs on "
            "the local backend, which would ignore it",
        ),
    ],
)
def test_bad_benchmark_flags_are_refused_before_anything_runs(argv, message, tmp_path, capsys):
    from rlfw.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["benchmark", "--suite", "smoke", "--out", str(tmp_path / "out"), *argv])
    assert exc.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_plan_covers_every_entry_framework_and_seed_at_the_preset_budget():
    jobs = plan(SUITES["classic"], ("rlfw", "sb3"), [0, 1, 2])
    # PPO x4, A2C, DQN, SAC, TD3, DDPG with their peer; PQN x2 alone (SB3 has none)
    assert len(jobs) == 9 * 2 * 3 + 2 * 3
    assert not [j for j in jobs if j.algo == "pqn" and j.framework == "sb3"]
    assert Job("rlfw", "ppo", "MountainCarContinuous-v0", 20_000, 0) in jobs  # its preset's
    assert Job("sb3", "td3", "Pendulum-v1", 20_000, 1) in jobs  # the zoo's budget
    assert Job("rlfw", "ppo", "CartPole-v1", 120_000, 2) in jobs
    assert Entry("ppo", "HalfCheetah-v5").budget == 1_000_000  # the MuJoCo preset's
    assert {j.steps for j in plan(SUITES["mujoco"], ("rlfw",), [0])} == {300_000}


@pytest.mark.integration
def test_a_job_s_plugins_are_imported_by_the_run_that_records_them(tmp_path, monkeypatch):
    """A job whose settings name a plugin runs with it (its record says so): the job's
    process imports it, as `rlfw train --plugin` does; here the plugin's sampler."""
    from rlfw.bench.run import run_job

    plugins = os.path.join(os.path.dirname(__file__), "plugins")
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([plugins, *filter(None, [os.environ.get("PYTHONPATH")])])
    )
    job = Job(
        "rlfw",
        "ppo",
        "CartPole-v1",
        1024,
        0,
        label="toy",
        settings=(("plugins", "toy_extensions"), ("sampler", "interleaved"), ("n_workers", "2")),
    )
    record = run_job(job, str(tmp_path))
    assert record["status"] == "done", record.get("error", record)
    assert record["config"]["plugins"] == ["toy_extensions"]
    assert record["config"]["sampler"] == "interleaved"


def test_an_entry_s_further_recorded_seeds_stay_in_its_plan(tmp_path):
    """An entry given more seeds than the suite's (to settle a close comparison) keeps
    them in every later run and report of the suite; other entries keep the suite's."""
    suite = SUITES["classic"]
    pendulum = Job("rlfw", "ppo", "Pendulum-v1", 200_000, 5)
    for job in (pendulum, replace(pendulum, framework="sb3"), replace(pendulum, seed=6)):
        os.makedirs(os.path.dirname(job.record_path(str(tmp_path))), exist_ok=True)
        open(job.record_path(str(tmp_path)), "w").close()
    jobs = plan(suite, ("rlfw", "sb3"), [0, 1, 2], recorded_in=str(tmp_path))
    seeds = {(j.framework, j.algo, j.env): [] for j in jobs}
    for j in jobs:
        seeds[j.framework, j.algo, j.env].append(j.seed)
    assert seeds["rlfw", "ppo", "Pendulum-v1"] == [0, 1, 2, 5, 6]
    assert seeds["sb3", "ppo", "Pendulum-v1"] == [0, 1, 2, 5]
    assert seeds["rlfw", "ppo", "CartPole-v1"] == [0, 1, 2]
    assert len(jobs) == 9 * 2 * 3 + 2 * 3 + 3


def test_a_v5_mujoco_id_reads_the_zoos_v4_block(tmp_path):
    import yaml

    path, key = zoo_hyperparams_file("ppo", "HalfCheetah-v5", str(tmp_path))
    assert key == "HalfCheetah-v4"
    block = yaml.safe_load(open(path))["HalfCheetah-v5"]
    assert block["learning_rate"] == pytest.approx(2.0633e-05) and block["n_steps"] == 512
    assert zoo_hyperparams_file("ppo", "CartPole-v1", str(tmp_path)) == (None, "CartPole-v1")
    assert zoo_settings("ppo", "HalfCheetah-v5") == block  # what its record holds
    assert zoo_settings("ppo", "ALE/Pong-v5")["n_epochs"] == 4  # the zoo's atari block
    assert zoo_settings("ppo", "MinAtar/Breakout-v1") is None


def test_a_record_thins_a_long_curve_to_block_means_that_keep_the_report_s_bins():
    """A peer's curve is one point per episode: thousands of them. The record keeps at
    most RECORD_CURVE_POINTS, each a block's mean, so the report's binned curve (20 cells)
    drawn from the record is the full curve's to within 0.05 on returns of std 1 (every
    13th episode alone leaves ~20 of them a cell: up to 0.54 off here)."""
    from rlfw.bench.run import RECORD_CURVE_POINTS, thin_curve

    rng = np.random.default_rng(0)
    steps = np.sort(rng.integers(1, 2_000_000, size=5_000))
    curve = [[int(s), float(s / 1e6 + rng.normal())] for s in steps]
    thinned = thin_curve(curve)
    assert len(thinned) <= RECORD_CURVE_POINTS
    grid = np.linspace(100_000, 2_000_000, 20)
    np.testing.assert_allclose(binned(thinned, grid), binned(curve, grid), atol=0.05)
    assert thin_curve(curve[:RECORD_CURVE_POINTS]) == curve[:RECORD_CURVE_POINTS]
    assert thin_curve(curve[:3], most=2) == [
        [np.mean(steps[:2]), np.mean([c[1] for c in curve[:2]])],
        curve[2],
    ]


def test_the_iqm_ci_depends_on_the_finals_and_seed_alone():
    """rliable resamples from numpy's global RNG whatever random_state it is given: the CI
    must not change with that state (a rebuilt report would move its bounds), nor leave
    it changed."""
    finals = [1.0, 2.0, 3.0, 10.0, 20.0]
    np.random.seed(1)
    first = iqm_with_ci(finals)
    np.random.seed(2)
    state = np.random.get_state()
    assert iqm_with_ci(finals) == first
    after = np.random.get_state()
    assert all(np.array_equal(a, b) for a, b in zip(state[1:3], after[1:3]))
    assert iqm_with_ci(finals, seed=1) != first


@pytest.mark.parametrize(
    "change,message",
    [
        ({"final_return": "high"}, "final_return must be a number, got 'high'"),
        ({"curve": [[2048, "x"]]}, "curve must be a list of [step, return] pairs"),
        ({"returns": None}, "returns must be a list of numbers, got None"),
        ({"policy_lag": "one"}, "policy_lag must be a number or null, got 'one'"),
        (
            {"seed": 1},
            "says seed=1, but it is the place of rlfw ppo on CartPole-v1, seed 0, 2048 "
            "steps: a record of another run",
        ),
        ("{not json", "is not valid JSON"),
        ([1, 2], "holds list, not an object"),
    ],
)
def test_a_broken_or_misplaced_record_is_named_not_counted(change, message, tmp_path):
    """Records travel between machines and through git: one that is not a run's record
    fails the report with its file and field, before anything is counted."""
    from rlfw.bench.run import finished

    job = Job("rlfw", "ppo", "CartPole-v1", 2048, 0)
    record = {
        "framework": "rlfw",
        "algo": "ppo",
        "env": "CartPole-v1",
        "seed": 0,
        "steps": 2048,
        "status": "done",
        "final_return": 500.0,
        "returns": [500.0],
        "curve": [[2048, 480.5]],
        "curve_s": [[3.5, 480.5]],
        "wall_s": 3.5,
        "steps_per_s": 585.1,
        "policy_lag": None,
        "env_steps": 2048,
    }
    path = job.record_path(str(tmp_path))
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        json.dump(record, f)
    assert finished(job, str(tmp_path))["final_return"] == 500.0
    with open(path, "w") as f:
        f.write(
            change
            if isinstance(change, str)
            else json.dumps(change if isinstance(change, list) else {**record, **change})
        )
    with pytest.raises(ValueError) as err:
        finished(job, str(tmp_path))
    assert str(err.value).startswith(f"run record {path}") and message in str(err.value)


def test_a_record_run_with_other_settings_than_today_s_is_refused(tmp_path):
    """A record holds the settings it ran with: once a preset or a default changes, its
    numbers are not the job's any more, and the report refuses it, naming the setting,
    rather than give them as today's. A key the record lacks came later: the run had its
    default, so a preset that sets it otherwise today is a change; a key removed since is
    not compared. The zoo's block is compared whole."""
    from rlfw.bench.run import finished

    job = Job("rlfw", "ppo", "CartPole-v1", 2048, 0)
    today = job_settings(job)
    assert today["ppo.value_coef"] == 0.5 and today["batch_B"] == 8
    assert not any(key.startswith(("dqn.", "a2c.", "atari.", "wandb.")) for key in today)
    record = {
        "framework": "rlfw",
        "algo": "ppo",
        "env": "CartPole-v1",
        "seed": 0,
        "steps": 2048,
        "status": "done",
        "final_return": 500.0,
        "returns": [500.0],
        "curve": [[2048, 480.5]],
        "curve_s": [[3.5, 480.5]],
        "wall_s": 3.5,
        "steps_per_s": 585.1,
        "env_steps": 2048,
    }
    path = job.record_path(str(tmp_path))
    os.makedirs(os.path.dirname(path))

    def read(config):
        with open(path, "w") as f:
            json.dump({**record, "config": config}, f)
        return finished(job, str(tmp_path))

    assert read({**today, "ppo.retired_option": 3})["final_return"] == 500.0
    with pytest.raises(ValueError) as err:
        read({**today, "ppo.value_coef": 0.25, "batch_B": 16})
    assert str(err.value).startswith(
        f"run record {path} ran with batch_B=16 where today's "
        "is 8; ppo.value_coef=0.25 where today's is 0.5: its "
        "numbers are not those of today's settings. Delete the "
        "record"
    )
    with pytest.raises(ValueError, match="config must be an object of dotted keys"):
        read("rlfw preset")
    # a key added since the record ran: fine at its default, a change where set otherwise
    older = {key: value for key, value in today.items() if key != "sde_sample_freq"}
    assert read(older)["final_return"] == 500.0
    without_epochs = {key: value for key, value in today.items() if key != "ppo.epochs"}
    with pytest.raises(
        ValueError,
        match=r"ran with ppo.epochs unset \(it came later: the run "
        r"had its default 10\) where today's is 20",
    ):
        read(without_epochs)
    # the SB3 peer's record holds the zoo's block: a zoo whose settings moved is caught too
    peer = Job("sb3", "ppo", "CartPole-v1", 2048, 0)
    peer_record = {**record, "framework": "sb3", "config": {"zoo.n_epochs": 10}}
    path = peer.record_path(str(tmp_path))
    with open(path, "w") as f:
        json.dump(peer_record, f)
    with pytest.raises(ValueError, match="ran with zoo.n_epochs=10 where today's is 20"):
        finished(peer, str(tmp_path))
    zoo_today = job_settings(peer)
    for config, message in [
        (
            {k: v for k, v in zoo_today.items() if k != "zoo.n_epochs"},
            "ran with zoo.n_epochs unset where today's is 20",
        ),
        ({**zoo_today, "zoo.use_sde": True}, "ran with zoo.use_sde=True where today's sets none"),
    ]:
        with open(path, "w") as f:
            json.dump({**peer_record, "config": config}, f)
        with pytest.raises(ValueError, match=message):
            finished(peer, str(tmp_path))


def test_a_report_names_the_seeds_whose_records_predate_their_settings():
    """Records written before they held their settings cannot be checked: the report says
    which."""
    base = {
        "algo": "ppo",
        "env": "CartPole-v1",
        "steps": 2048,
        "status": "done",
        "final_return": 500.0,
        "wall_s": 3.5,
        "steps_per_s": 585.1,
        "settings": "preset",
    }
    rlfw = [
        {**base, "framework": "rlfw", "seed": 0},
        {**base, "framework": "rlfw", "seed": 1, "config": {"ppo.epochs": 20}},
    ]
    assert summarize(rlfw)["settings_unrecorded"] == [0]
    entry = {
        "algo": "ppo",
        "env": "CartPole-v1",
        "steps": 2048,
        "references": [],
        "frameworks": {"rlfw": summarize(rlfw)},
        "goals": {},
        "curve_png": None,
        "gif": None,
    }
    text = markdown({"suite": "s", "about": "a", "machine": "m", "entries": [entry]})
    assert (
        "rlfw: seeds [0] were recorded before records held their settings: not checked "
        "against today's."
    ) in text


def test_iqm_and_its_ci_and_the_curve_binning():
    iqm, low, high = iqm_with_ci([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 100.0])
    assert iqm == pytest.approx(3.5)  # the middle half: 2, 3, 4, 5
    assert low <= iqm <= high < 100
    curve = [(50, 1.0), (150, 3.0), (160, 5.0)]
    np.testing.assert_allclose(binned(curve, np.array([100.0, 200.0, 300.0])), [1, 4, 4])


@pytest.mark.integration
def test_report_only_runs_nothing_and_lists_what_is_not_run_yet(tmp_path):
    done = benchmark(tmp_path, "--report-only")
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (tmp_path / "runs").exists()
    readme = (tmp_path / "README.md").read_text()
    assert "(no finished run yet)" in readme and "rlfw: seeds [0, 1] not run yet" in readme
    assert benchmark(tmp_path, "--report-only").returncode == 0  # nothing to lose: rebuilt


def test_report_only_without_records_refuses_to_erase_a_report_of_finished_runs(tmp_path):
    """A report written before runs kept records (docs/benchmarks/mujoco) cannot be rebuilt:
    --report-only says so and leaves it, instead of overwriting it with 'not run'."""
    from rlfw.bench.run import run_suite
    from rlfw.launch.backends import LocalBackend

    old = {"suite": "smoke", "runs": [{"framework": "rlfw", "final_return": 500.0}]}
    (tmp_path / "results.json").write_text(json.dumps(old))
    (tmp_path / "README.md").write_text("the old report")
    with pytest.raises(
        ValueError,
        match=r"no run records under .*records, but .*results"
        r"\.json reports 1 finished run\(s\)",
    ):
        run_suite("smoke", str(tmp_path), LocalBackend(1), say=lambda _: None, report_only=True)
    assert (tmp_path / "README.md").read_text() == "the old report"
    assert json.loads((tmp_path / "results.json").read_text()) == old


@pytest.mark.integration
def test_a_run_that_fails_is_reported_with_its_log_and_not_counted_as_finished(tmp_path):
    from rlfw.bench.run import run_job

    job = Job("rlfw", "ppo", "NoSuchEnv-v0", 256, 0)
    result = run_job(job, str(tmp_path))
    assert result["status"].startswith("failed (exit ") and result.get("final_return") is None
    assert "NoSuchEnv-v0" in result["log_tail"]
    assert not os.path.exists(os.path.join(job.run_dir(str(tmp_path)), "result.json"))


def test_a_job_clears_an_interrupted_attempt_and_refuses_a_live_run(tmp_path):
    """A suite stopped mid-run leaves a run folder behind; rerunning the suite must start
    that run afresh (it was refused as 'already holds a run'), never a folder in use."""
    from rlfw.bench.job import fresh_run_folder
    from rlfw.runfolder.folder_lock import FolderBusyError, FolderLock

    left = tmp_path / "left" / "run"
    left.mkdir(parents=True)
    (left / "config.json").write_text("{}")
    (left / "progress.csv").write_text("step\n")
    fresh_run_folder(str(left))
    assert not left.exists()
    live = tmp_path / "live" / "run"
    with FolderLock.acquire(str(live)):
        with pytest.raises(FolderBusyError, match="in use by another rlfw run"):
            fresh_run_folder(str(live))
    assert live.exists()


def test_a_suite_with_a_baseline_reads_the_other_suite_s_records_env_by_env(tmp_path):
    from rlfw.bench.run import Job, run_suite, write_record
    from rlfw.launch.backends import LocalBackend

    steps = SUITES["minatar-qlearning"].entries[0].budget
    curve = [(steps // 2, 1.0), (steps, 2.0)]
    for seed, final in enumerate((4.0, 6.0, 8.0)):  # the minatar suite's DQN, Breakout
        job = Job("rlfw", "dqn", "MinAtar/Breakout-v1", steps, seed, peer_settings="same")
        write_record(
            job,
            str(tmp_path / "minatar"),
            {
                **job.__dict__,
                "status": "done",
                "final_return": final,
                "returns": [final],
                "wall_s": 10.0,
                "wait_share": 0.0,
                "steps_per_s": steps / 10,
                "curve": curve,
                "settings": "rlfw preset",
            },
        )
    job = Job("rlfw", "c51", "MinAtar/Breakout-v1", steps, 0)
    write_record(
        job,
        str(tmp_path / "minatar-qlearning"),
        {
            **job.__dict__,
            "status": "done",
            "final_return": 9.0,
            "returns": [9.0],
            "wall_s": 12.0,
            "wait_share": 0.0,
            "steps_per_s": steps / 12,
            "curve": curve,
            "settings": "rlfw preset",
        },
    )

    data = run_suite(
        "minatar-qlearning",
        str(tmp_path / "minatar-qlearning"),
        LocalBackend(1),
        say=lambda _: None,
        report_only=True,
    )
    breakout, invaders = data["comparison"]
    assert breakout["env"] == "MinAtar/Breakout-v1"
    assert list(breakout["algos"]) == ["dqn", "c51", "rainbow"]
    assert breakout["algos"]["dqn"]["finals"] == [4.0, 6.0, 8.0]
    assert breakout["algos"]["c51"]["finals"] == [9.0]
    assert "finals" not in breakout["algos"]["rainbow"]
    assert "finals" not in invaders["algos"]["dqn"]  # no record there: nothing invented
    readme = (tmp_path / "minatar-qlearning" / "README.md").read_text()
    assert "--suite minatar-qlearning` (finished runs" in readme  # no --peer: it has none
    with pytest.raises(ValueError, match="SB3 implements none of c51, rainbow"):
        run_suite("minatar-qlearning", str(tmp_path / "q"), LocalBackend(1), peer="sb3")
    assert "## MinAtar/Breakout-v1, 250,000 env steps: against dqn" in readme
    assert "| dqn | 4.0, 6.0, 8.0 | 6.0 [4.0, 8.0] | 10 |" in readme
    assert (tmp_path / "minatar-qlearning" / breakout["curve_png"]).stat().st_size > 0


def test_a_stopped_benchmark_run_leaves_no_result_to_count(tmp_path, monkeypatch):
    """A job whose training was stopped (SIGTERM or Ctrl-C end a run cleanly, with an
    ``interrupted`` result) writes no result file: a partial run's return must not be
    recorded as the entry's, and a re-run of the suite starts it again."""
    import rlfw.launch.build
    from rlfw.bench import job as job_module
    from rlfw.runners.schedule import TrainResult

    class StoppedRunner:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def train(self):
            return TrainResult(env_steps=512, iterations=4, interrupted=True)

    monkeypatch.setattr(rlfw.launch.build, "build_runner", lambda *a, **k: StoppedRunner())
    job = Job("rlfw", "ppo", "CartPole-v1", 4096, 0)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with pytest.raises(SystemExit, match=r"stopped at 512 of 4096 env steps; no result"):
        job_module.main([json.dumps(job.__dict__), str(run_dir)])
    assert not (run_dir / job_module.RESULT_FILE).exists()
    # the zoo's peer returns from a stopped learn() as from a finished one (it catches
    # KeyboardInterrupt to save the model): its short run is no result either
    partial = {"env_steps": 8382, "returns": [-117.6], "wall_s": 1.0}
    monkeypatch.setitem(job_module.RUNNERS, "sb3", lambda job, run_dir: partial)
    job = Job("sb3", "sac", "Pendulum-v1", 20_000, 0)
    with pytest.raises(SystemExit, match=r"sb3 sac Pendulum-v1 seed 0 stopped at 8382 of 20000"):
        job_module.main([json.dumps(job.__dict__), str(run_dir)])
    assert not (run_dir / job_module.RESULT_FILE).exists()


def test_the_spaces_suite_plans_its_peers_and_its_mask_ablations():
    """Every entry's rlfw seeds; SB3's where it has a counterpart (not masked DQN); the
    masked entries' rlfw runs again without the mask, under their own label."""
    jobs = plan(SUITES["spaces"], ("rlfw", "sb3"), [0, 1])
    runs = {(j.framework, j.algo, j.env, j.label) for j in jobs}
    assert len(jobs) == 2 * len(runs)
    assert runs == {
        ("rlfw", "ppo", "MiniGrid-DoorKey-5x5-v0", ""),
        ("sb3", "ppo", "MiniGrid-DoorKey-5x5-v0", ""),
        ("rlfw", "ppo", "Taxi-v4", ""),
        ("sb3", "ppo", "Taxi-v4", ""),
        ("rlfw", "ppo", "Taxi-v4", "no-mask"),
        ("rlfw", "ppo", "rlfw/ConnectFour-v0", ""),
        ("sb3", "ppo", "rlfw/ConnectFour-v0", ""),
        ("rlfw", "ppo", "rlfw/ConnectFour-v0", "no-mask"),
        ("rlfw", "dqn", "Taxi-v4", ""),
    }
    ablated = next(j for j in jobs if j.label == "no-mask")
    assert ablated.settings == (("env_options.action_mask", "none"),)
    assert {j.steps for j in jobs if j.env == "Taxi-v4"} == {200_000, 120_000}
    assert not [j for j in plan(SUITES["spaces"], ("rlfw",), [0]) if j.framework == "sb3"]


def test_a_report_gives_an_ablation_its_own_row_and_no_peer_row_where_there_is_none(tmp_path):
    from rlfw.bench.report import write_report
    from rlfw.bench.suites import Ablation, Suite

    ablation = Ablation("no-mask", (("env_options.action_mask", "none"),), "without masks")
    suite = Suite(
        (
            Entry("ppo", "Taxi-v4", 1000, ablation=ablation),
            Entry("dqn", "Taxi-v4", 1000, peer=False),
        ),
        peer_settings="same",
    )
    base = {
        "env": "Taxi-v4",
        "steps": 1000,
        "status": "done",
        "wall_s": 2.0,
        "steps_per_s": 500.0,
        "settings": "preset",
        "curve": [(500, 1.0), (1000, 2.0)],
    }
    results = [
        {
            **base,
            "framework": fw,
            "algo": algo,
            "seed": seed,
            "label": label,
            "final_return": final + seed,
        }
        for fw, algo, label, final in [
            ("rlfw", "ppo", "", 7.0),
            ("sb3", "ppo", "", 6.0),
            ("rlfw", "ppo", "no-mask", -200.0),
            ("rlfw", "dqn", "", 5.0),
        ]
        for seed in (0, 1)
    ]
    data = write_report("spaces", suite, results, str(tmp_path))
    ppo, dqn = data["entries"]
    assert list(ppo["frameworks"]) == ["rlfw", "sb3", "rlfw no-mask"]
    assert ppo["frameworks"]["rlfw"]["finals"] == [7.0, 8.0]  # the ablation's not mixed in
    assert ppo["frameworks"]["rlfw no-mask"]["finals"] == [-200.0, -199.0]
    assert ppo["goals"]["median_at_least_peer"]
    assert ppo["goals"]["iqm_not_below_peer_ci"]
    assert list(dqn["frameworks"]) == ["rlfw"] and dqn["goals"] == {}
    readme = (tmp_path / "README.md").read_text()
    assert "| rlfw no-mask | preset | -200.0, -199.0 |" in readme
    assert "rlfw no-mask: without masks." in readme


@pytest.mark.parametrize("env", ["Taxi-v4", "rlfw/ConnectFour-v0", "MiniGrid-DoorKey-5x5-v0"])
def test_the_sb3_peer_reads_a_structured_observation_with_rlfw_s_network(env):
    """On a Dict observation the peer's features extractor is rlfw's per-leaf encoder:
    the same parameters and, for the same observation, the same features (SB3's own
    one-hot codes for Discrete leaves, rlfw's encoders for the rest); a masked env gets
    MaskablePPO, acting over the mask of the observation it acts on."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.preprocessing import preprocess_obs
    from stable_baselines3.common.utils import obs_as_tensor

    import rlfw.envs  # noqa: F401  (registers rlfw/ConnectFour-v0)
    from rlfw.bench.same_settings import sb3_env, sb3_model
    from rlfw.buffers.tree import tree_map
    from rlfw.envs.spaces import EnvSpaces
    from rlfw.launch.build import build_agent
    from rlfw.launch.config import RunConfig

    config = RunConfig.for_env(env, "ppo")
    factory = config.env_factory().resolved()
    spaces = EnvSpaces.of(factory)
    agent = build_agent(config, spaces)
    envs = make_vec_env(lambda: sb3_env(config, factory, True), n_envs=2, seed=0)
    model = sb3_model(config, envs, 0, spaces.observation)
    assert type(model).__name__ == ("PPO" if env.startswith("MiniGrid") else "MaskablePPO")
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(model.policy) == count(agent.model)
    obs = envs.reset()
    if type(model).__name__ == "MaskablePPO":
        assert np.array_equal(np.stack(envs.env_method("action_masks")), obs["action_mask"] > 0)
    theirs = model.policy.features_extractor(
        preprocess_obs(obs_as_tensor(obs, "cpu"), model.observation_space, False)
    )
    ours = agent.model.encoder(tree_map(torch.as_tensor, obs))
    assert torch.equal(theirs, ours)
    envs.close()


def test_entries_runs_only_the_named_entries_and_reports_the_whole_suite(tmp_path, monkeypatch):
    import rlfw.bench.run as bench_run
    from rlfw.launch.backends import LocalBackend

    ran = []

    def fake_run(job, out_dir, cores=None):
        ran.append((job.framework, job.algo, job.env, job.seed))
        return {
            **job.__dict__,
            "status": "done",
            "final_return": 9.0,
            "returns": [9.0],
            "wall_s": 1.0,
            "wait_share": 0.0,
            "steps_per_s": 2048.0,
            "curve": [(2048, 9.0)],
            "settings": "fake",
        }

    monkeypatch.setattr(bench_run, "run_job", fake_run)
    data = bench_run.run_suite(
        "smoke", str(tmp_path), LocalBackend(1), say=lambda _: None, entries=["a2c-CartPole-v1"]
    )
    assert sorted(ran) == [("rlfw", "a2c", "CartPole-v1", 0), ("rlfw", "a2c", "CartPole-v1", 1)]
    ppo, a2c = data["entries"]
    assert a2c["frameworks"]["rlfw"]["finals"] == [9.0, 9.0]
    assert ppo["frameworks"]["rlfw"]["not_run"] == [0, 1]  # read, not run: none finished
    with pytest.raises(ValueError, match=r"no entries \['ppo-Pong'\]; its entries: \['ppo-Cart"):
        bench_run.run_suite("smoke", str(tmp_path), LocalBackend(1), entries=["ppo-Pong"])


def test_the_sb3_peer_refuses_what_sb3_cannot_read_or_run_naming_it():
    import gymnasium as gym

    from rlfw.bench.same_settings import sb3_model, sb3_observation_space
    from rlfw.launch.config import RunConfig

    box = gym.spaces.Box(-1, 1, (2,), np.float32)
    with pytest.raises(ValueError, match=r"one level of Dict; keys \['inner'\] are nested"):
        sb3_observation_space(gym.spaces.Dict({"inner": gym.spaces.Dict({"x": box})}))
    with pytest.raises(ValueError, match="SB3 reads no Tuple observations"):
        sb3_observation_space(gym.spaces.Tuple((box, box)))

    class VecEnv:  # what sb3_model reads of a vector env before building anything
        observation_space = gym.spaces.Dict({"x": box})

    with pytest.raises(ValueError, match="runs DQN on image observations only"):
        sb3_model(RunConfig.for_env("Taxi-v4", "dqn"), VecEnv(), 0)


def test_the_sb3_peer_runs_rlfw_s_reward_scaling_and_schedules_or_refuses_the_setting():
    """A setting the peer dropped would make "the same settings" false: it mirrors reward
    normalization (VecNormalize with rlfw's clip and gamma) and the linear lr and clip
    schedules, and refuses by name what it cannot run."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from rlfw.bench.same_settings import differences, sb3_model
    from rlfw.launch.config import RunConfig

    config = RunConfig.for_env("CartPole-v1", "ppo")
    config.ppo.normalize_reward, config.ppo.reward_clip, config.ppo.gamma = True, 5.0, 0.9
    config.ppo.anneal_lr, config.ppo.anneal_clip = True, True
    config.log_std_init = -1.0  # a Box action's Gaussian starts at rlfw's std too
    pendulum = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    gaussian = sb3_model(config, pendulum, seed=0).policy
    assert torch.equal(gaussian.log_std.detach(), torch.full((1,), -1.0))
    pendulum.close()
    envs = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = sb3_model(config, envs, seed=0)
    scaled = model.get_env()
    assert isinstance(scaled, VecNormalize)
    assert (scaled.norm_obs, scaled.norm_reward) == (False, True)
    assert (scaled.clip_reward, scaled.gamma) == (5.0, 0.9)
    assert any("VecNormalize" in d for d in differences(config))  # when it updates differs
    # rlfw's linear_schedule at a quarter of the run is 3/4 of the base value
    assert model.lr_schedule(0.75) == pytest.approx(0.75 * config.ppo.learning_rate)
    assert model.clip_range(0.75) == pytest.approx(0.75 * config.ppo.clip)
    config.ppo.normalize_reward, config.ppo.anneal_lr, config.ppo.anneal_clip = False, False, False
    plain = sb3_model(config, envs, seed=0)
    assert not isinstance(plain.get_env(), VecNormalize)
    assert plain.lr_schedule(0.25) == config.ppo.learning_rate
    assert plain.clip_range(0.25) == config.ppo.clip
    assert not any("VecNormalize" in d for d in differences(config))
    envs.close()

    refused = RunConfig.for_env("CartPole-v1", "ppo")
    refused.normalize_obs, refused.ppo.amp = True, "bf16"
    with pytest.raises(ValueError, match=r"normalize_obs=True .*; ppo.amp='bf16'"):
        sb3_model(refused, envs, seed=0)
    dqn = RunConfig.for_env("MinAtar/Breakout-v1", "dqn")
    dqn.dqn.double_dqn, dqn.dqn.n_step = True, 3
    probe = dqn.env_factory()(True)

    class MinAtarVecEnv:  # what sb3_model reads of a vector env before building anything
        observation_space = probe.observation_space

    probe.close()
    with pytest.raises(ValueError, match=r"dqn.double_dqn=True .*; dqn.n_step=3"):
        sb3_model(dqn, MinAtarVecEnv(), seed=0)


@pytest.mark.parametrize(
    "ours, peers, median_met, iqm_met",
    [
        ([5.0, 9.0, 10.0], [6.0, 7.0, 8.0], True, True),
        # lower median, yet an IQM inside the peer's CI: three seeds cannot call it a loss
        ([5.0, 6.0, 7.0], [4.0, 7.0, 9.0], False, True),
        ([1.0, 2.0, 3.0], [10.0, 11.0, 12.0], False, False),
    ],
)
def test_goals_read_the_median_and_the_iqm_against_the_peers_ci(ours, peers, median_met, iqm_met):
    def runs(finals):
        done = {"status": "done", "wall_s": 1.0, "steps_per_s": 1.0, "settings": "preset"}
        return [{**done, "seed": s, "final_return": f} for s, f in enumerate(finals)]

    summary = {"rlfw": summarize(runs(ours)), "sb3": summarize(runs(peers))}
    goals = _goals(summary, time_goal=0.5)
    assert goals["median_at_least_peer"] is median_met
    assert goals["iqm_not_below_peer_ci"] is iqm_met
