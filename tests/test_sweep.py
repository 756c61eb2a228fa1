"""``rlfw sweep``: grid x seeds as separate train processes, row by row; failures are
reported with their log; re-runs skip finished variants; Ray runs the same grid."""

import json
import os
import subprocess
import sys

import pytest

from rlfw.cli import main
from rlfw.launch.sweep import expand, parse_grid

TINY = ["--steps", "256", "--eval-every", "256", "--eval-episodes", "1"]
GRID = ["--grid", "ppo.epochs=2,4", "--grid", "n_envs=4,8"]  # so no --batch-B beside it
SMALL = [*TINY, "--batch-B", "4"]


def sweep(runs_dir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlfw", "sweep", "--runs-dir", str(runs_dir), *args],
        capture_output=True,
        text=True,
        timeout=400,
    )


def rows(runs_dir) -> dict[str, dict]:
    with open(os.path.join(runs_dir, "summary.json")) as f:
        return {row["name"]: row for row in json.load(f)}


def test_grid_expands_keys_aliases_and_seeds():
    variants = expand(parse_grid(["ppo.epochs=4,10", "n_envs=8,32"]), [0, 1])
    assert len(variants) == 8
    assert variants[0].settings == (("ppo.epochs", "4"), ("batch_B", "8"))
    assert [v.seed for v in variants[:2]] == [0, 1]
    assert variants[0].name == "ppo.epochs=4,batch_B=8,seed=0"
    assert len({v.name for v in variants}) == 8
    # a tuple value keeps its commas inside brackets
    widths = expand(parse_grid(["hidden=[64,64],[256]"]), [0])
    assert [v.settings for v in widths] == [(("hidden", "[64,64]"),), (("hidden", "[256]"),)]


@pytest.mark.integration
def test_two_by_two_grid_is_reported_row_by_row_and_rerun_skips_it(tmp_path):
    runs = tmp_path / "sweep"
    done = sweep(runs, *GRID, "--max-parallel", "2", *TINY)
    assert done.returncode == 0, done.stderr[-3000:]
    progress = [line for line in done.stdout.splitlines() if line.startswith("rlfw sweep: [")]
    assert len(progress) == 4 and progress[-1].startswith("rlfw sweep: [4/4]")
    table = rows(runs)
    assert len(table) == 4
    for name, row in table.items():
        assert row["status"] == "done", row
        assert row["final_eval"] is not None and row["env_steps"] >= 256
        assert row["steps_per_s"] > 0 and row["wall_s"] > 0
        assert f"| {name} | done |" in done.stdout
        saved = json.loads((runs / name / "config.json").read_text())
        assert (
            saved["ppo"]["epochs"]
            == int(row["settings"]["ppo.epochs"])
            == int(name.split("ppo.epochs=")[1].split(",")[0])
        )
        assert saved["batch_B"] == int(row["settings"]["batch_B"])
    assert (runs / "summary.md").exists() and (runs / "summary.csv").exists()

    logs = {name: (runs / name / "train.log").stat().st_mtime for name in table}
    again = sweep(runs, *GRID, "--max-parallel", "2", *TINY)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {row["status"] for row in rows(runs).values()} == {"skipped (done)"}
    assert {name: (runs / name / "train.log").stat().st_mtime for name in table} == logs


@pytest.mark.integration
def test_a_failing_variant_is_reported_with_its_log(tmp_path):
    runs = tmp_path / "sweep"
    # an absurd learning rate makes the first update non-finite: that run exits 1
    done = sweep(runs, "--grid", "ppo.learning_rate=1e38,0.001", "--max-parallel", "2", *SMALL)
    assert done.returncode == 1
    table = rows(runs)
    bad, good = table["ppo.learning_rate=1e38,seed=0"], table["ppo.learning_rate=0.001,seed=0"]
    assert bad["status"] == "failed (exit 1)" and good["status"] == "done"
    assert "non-finite loss" in bad["log_tail"]
    assert "| ppo.learning_rate=1e38,seed=0 | failed (exit 1) |" in done.stdout
    assert "last lines of its log" in done.stdout and "non-finite loss" in done.stdout
    again = sweep(runs, "--grid", "ppo.learning_rate=1e38,0.001", *SMALL)
    assert rows(runs)["ppo.learning_rate=1e38,seed=0"]["status"] == "failed (exit 1)"
    assert rows(runs)["ppo.learning_rate=0.001,seed=0"]["status"] == "skipped (done)"
    assert again.returncode == 1


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--grid", "ppo.epoch=4,10"], "grid key 'ppo.epoch' is not a config field; valid keys: "),
        (["--grid", "ppo.epochs=four"], "config key 'ppo.epochs' takes an integer, got 'four'"),
        (["--grid", "ppo.epochs"], "--grid takes KEY=V1,V2,..., got 'ppo.epochs'"),
        (["--grid", "ppo.epochs=2", "--seed", "3"], "the sweep sets --log-dir, --resume, --seed"),
        (["--grid", "batch_B=0"], "batch_B must be a positive integer, got 0"),
        (
            ["--grid", "dqn.gamma=0.9,0.95", "--algo", "rainbow"],
            "config key 'dqn.gamma' belongs to algo 'dqn', but this run trains 'rainbow'",
        ),
        (["--grid", "ppo.epochs=2", "--max-parallel", "0"], "max_parallel must be >= 1, got 0"),
        # a seed or a grid point twice is one run counted twice in the summary
        (
            ["--grid", "ppo.epochs=2", "--seeds", "0", "1", "0"],
            "seeds must be one or more different seeds, got [0, 1, 0]",
        ),
        (
            ["--grid", "ppo.epochs=2", "--seeds", "-1"],
            "seed must be an integer from 0 to 2**32 - 1",
        ),
        (["--grid", "ppo.epochs=2,4,2"], "grid key 'ppo.epochs' repeats a value: ['2', '4', '2']"),
        (
            ["--grid", "ppo.epochs=2", "--grid", "ppo.epochs=4"],
            "grid key 'ppo.epochs' is given twice; list all its values in one --grid "
            "ppo.epochs=V1,V2",
        ),
        (
            ["--grid", "ppo.epochs=2", "--ray-address", "auto"],
            "--ray-address is for --backend ray; this sweep runs on the local backend",
        ),
        (["--grid", "ppo.epochs=2", "--cpus-per-run", "2"], "--cpus-per-run is for --backend ray"),
        # a key the grid and the train flags both set: the grid's value would silently win
        (["--grid", "seed=1,2"], "grid key 'seed' is the sweep's own: give the seeds with --seeds"),
        (
            ["--grid", "schedule.n_steps=600,700", "--steps", "1000"],
            "grid key 'schedule.n_steps' is also set by the train flags (--steps); set it in one "
            "place",
        ),
        (
            ["--grid", "ppo.epochs=2,4", "--set", "ppo.epochs=4"],
            "grid key 'ppo.epochs' is also set by the train flags (--set ppo.epochs=4)",
        ),
        (
            ["--grid", "ppo.learning_rate=1e-3,1e-4", "--lr", "3e-4"],
            "grid key 'ppo.learning_rate' is also set by the train flags (--lr)",
        ),
        (
            ["--grid", "n_envs=4,8", "--n-envs", "16"],
            "grid key 'batch_B' is also set by the train flags (--batch-B)",
        ),
    ],
)
def test_bad_sweep_is_refused_before_anything_starts(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["sweep", "--runs-dir", str(tmp_path / "sweep"), *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    if "valid keys" in message:
        assert "ppo.epochs" in err and "batch_B" in err
    assert not (tmp_path / "sweep").exists()


@pytest.mark.integration
def test_ray_backend_runs_the_same_grid_with_the_same_results(tmp_path):
    pytest.importorskip("ray", reason="the [ray] extra is part of [all], which CI installs")
    local, ray = tmp_path / "local", tmp_path / "ray"
    # two variants are enough to show each row is its own run; seed 1 is not the default
    grid = ["--grid", "ppo.epochs=2,4", "--seeds", "1"]
    done = sweep(local, *grid, "--max-parallel", "2", *SMALL)
    assert done.returncode == 0, done.stderr[-3000:]
    done = sweep(ray, *grid, "--max-parallel", "2", "--backend", "ray", *SMALL)
    assert done.returncode == 0, done.stderr[-3000:]
    by_ray, by_local = rows(ray), rows(local)
    assert set(by_ray) == set(by_local) == {"ppo.epochs=2,seed=1", "ppo.epochs=4,seed=1"}
    for name, row in by_ray.items():
        assert row["status"] == "done"
        assert row["final_eval"] == by_local[name]["final_eval"]  # same runs, bitwise
