"""experiments/gpu_check.py, in its CPU smoke size: the prepared GPU command cannot rot."""
import json
import subprocess
import sys

import pytest
import torch


def test_gpu_check_smoke_on_cpu_passes_every_row_and_writes_its_table(tmp_path):
    done = subprocess.run([sys.executable, "experiments/gpu_check.py", "--device", "cpu",
                           "--smoke", "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads((tmp_path / "results.json").read_text())
    checks = [r["check"] for r in data["rows"]]
    assert checks[:3] == ["sampler serial", "sampler gpu", "sampler alternating"]
    for expected in ("ppo sync", "ppo concurrent", "ppo async", "ppo sync amp=bf16",
                     "ppo sync compile=True", "dqn async", "torchrun 1 rank(s), gloo",
                     "torchrun 2 rank(s), gloo"):
        assert expected in checks, (expected, checks)
    assert all(r["ok"] for r in data["rows"]), data["rows"]
    assert "samples equal serial's" in data["rows"][1]["result"]
    assert "| sampler gpu | yes |" in (tmp_path / "README.md").read_text()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_gpu_check_on_a_machine_without_cuda_says_so():
    done = subprocess.run([sys.executable, "experiments/gpu_check.py"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "torch sees no GPU" in done.stderr
