"""experiments/scaling/study.py: the smoke scale runs all three parts and writes its
tables, plots and numbers; the DGX plan is well-formed without a GPU."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

STUDY = str(Path(__file__).parents[1] / "experiments" / "scaling" / "study.py")
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_smoke_scale_writes_tables_and_plots(tmp_path):
    out, runs = tmp_path / "out", tmp_path / "runs"
    done = subprocess.run(
        [sys.executable, STUDY, "--scale", "smoke", "--out", str(out), "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    kinds = {r["sampler"] for r in results["sampler"]}
    assert kinds == {"serial", "cpu", "queue"}
    assert all(r["steps_per_s"] > 0 for r in results["sampler"])
    assert "batch" not in results  # on MinAtar: claims.py, tested below
    assert "claims.py --part batch --scale smoke" in done.stdout
    ranks = {(r["kind"], r["ranks"]): r for r in results["ranks"]}
    assert set(ranks) == {
        ("strong", 1),
        ("strong", 2),
        ("weak", 1),
        ("weak", 2),
        ("weak, 1 core per rank", 1),
        ("weak, 1 core per rank", 2),
    }
    assert ranks[("weak, 1 core per rank", 1)]["efficiency"] == 1.0
    assert all(r["status"] == 0 and r["steps_per_s"] > 0 for r in ranks.values())
    assert ranks[("weak", 1)]["efficiency"] == 1.0 and ranks[("weak", 2)]["efficiency"] > 0
    assert (
        json.loads((runs / "ranks" / "strong-ranks=2" / "config.json").read_text())["world_size"]
        == 2
    )
    text = (out / "README.md").read_text()
    for heading in ("## (a) Sampler throughput", "## (c) Learner ranks (torchrun)"):
        assert heading in text
    for name in ("sampler_scaling.png", "rank_scaling.png"):
        assert (out / name).read_bytes()[:8] == PNG
        assert f"({name})" in text


def test_dgx_plan_is_well_formed_without_running():
    done = subprocess.run(
        [sys.executable, STUDY, "--scale", "dgx", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "(b) 12 training runs; (c) 8 torchrun launches" in done.stdout
    assert '"device": "cuda"' in done.stdout


CLAIMS = str(Path(__file__).parents[1] / "experiments" / "scaling" / "claims.py")


@pytest.mark.integration
def test_minatar_claims_smoke_runs_both_parts_keeps_records_and_rebuilds(tmp_path):
    """The batch-size and runner claims at their smoke size: every run, its record, the
    tables and curves; --report-only rebuilds the same report from the records alone."""
    for part, rows in (("batch", ("x1", "x2")), ("runners", ("sync", "concurrent", "async"))):
        out = tmp_path / part
        done = subprocess.run(
            [sys.executable, CLAIMS, "--part", part, "--scale", "smoke", "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        data = json.loads((out / "results.json").read_text())
        (table,) = data["tables"]
        assert sorted(table["rows"]) == sorted(rows)
        assert all(r["seeds"] == [0] and len(r["finals"]) == 1 for r in table["rows"].values())
        if part == "batch":
            assert table["target"] is not None
        else:
            assert table["rows"]["async"]["policy_lag"] > 0
        assert (out / table["png"]).read_bytes()[:8] == PNG
        assert len(list((out / "records").rglob("*.json"))) == len(rows)
        readme = (out / "README.md").read_text()
        import shutil

        shutil.rmtree(out / "runs")
        again = subprocess.run(
            [
                sys.executable,
                CLAIMS,
                "--part",
                part,
                "--scale",
                "smoke",
                "--out",
                str(out),
                "--report-only",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert again.returncode == 0, again.stderr[-2000:]
        assert (out / "README.md").read_text() == readme


def test_minatar_claims_rejects_an_algorithm_its_scale_does_not_study(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            CLAIMS,
            "--part",
            "batch",
            "--scale",
            "smoke",
            "--out",
            str(tmp_path),
            "--algos",
            "ppo,dqn",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "--algos 'ppo,dqn'" in done.stderr and "studies ppo" in done.stderr
    assert not (tmp_path / "records").exists()
