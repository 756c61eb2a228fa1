"""experiments/README.md indexes every script, and every script answers ``--help``."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
EXPERIMENTS = ROOT / "experiments"
SCRIPTS = sorted(str(p.relative_to(EXPERIMENTS)) for p in EXPERIMENTS.rglob("*.py"))


def test_the_index_lists_every_script_once_with_a_status():
    rows = re.findall(
        r"^\| `([^`]+\.py)` \|.*\| (example|tool|finished)\b[^|]*\|$",
        (EXPERIMENTS / "README.md").read_text(),
        re.M,
    )
    listed = [name for name, _ in rows]
    assert sorted(listed) == SCRIPTS, set(SCRIPTS) ^ set(listed)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_answers_help(script):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(EXPERIMENTS / script), "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:"), done.stdout[:300]
