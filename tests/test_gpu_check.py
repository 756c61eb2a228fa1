"""experiments/gpu_check.py, in its CPU smoke size: the prepared GPU command cannot rot."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch


def docs_gpu() -> dict[str, bytes]:
    folder = Path("docs/gpu")
    return {p.name: p.read_bytes() for p in folder.glob("*")} if folder.exists() else {}


@pytest.mark.integration
def test_gpu_check_smoke_on_cpu_passes_every_row_and_writes_its_table_outside_docs():
    before = docs_gpu()
    done = subprocess.run(
        [sys.executable, "experiments/gpu_check.py", "--device", "cpu", "--smoke"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert docs_gpu() == before  # a smoke run never writes where real results belong
    tmp_path = Path(re.search(r"-> (\S+)/README.md", done.stdout).group(1))
    assert tmp_path.is_absolute() and "docs" not in tmp_path.parts
    data = json.loads((tmp_path / "results.json").read_text())
    checks = [r["check"] for r in data["rows"]]
    assert checks[:3] == ["sampler serial", "sampler gpu", "sampler alternating"]
    for expected in (
        "ppo sync",
        "ppo concurrent",
        "ppo async",
        "ppo sync amp=None",
        "ppo sync amp=bf16",
        "ppo sync compile=True",
        "dqn async",
        "torchrun 1 rank(s), gloo",
        "torchrun 2 rank(s), gloo",
        "sac rlfw",
        "sac sb3",
        "td3 rlfw",
        "td3 sb3",
        "sac rlfw matmul_precision=high",
    ):
        assert expected in checks, (expected, checks)
    assert all(r["ok"] for r in data["rows"]), data["rows"]
    assert "samples equal serial's" in data["rows"][1]["result"]
    assert "| sampler gpu | yes |" in (tmp_path / "README.md").read_text()
    shutil.rmtree(tmp_path)


def test_gpu_check_smoke_refuses_to_write_into_docs():
    done = subprocess.run(
        [
            sys.executable,
            "experiments/gpu_check.py",
            "--device",
            "cpu",
            "--smoke",
            "--out",
            "docs/gpu",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--smoke results are not results" in done.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_gpu_check_on_a_machine_without_cuda_says_so():
    done = subprocess.run(
        [sys.executable, "experiments/gpu_check.py"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "torch sees no GPU" in done.stderr
