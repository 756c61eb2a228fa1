"""experiments/README.md indexes every script, and every script answers ``--help``."""

import os
import re
import subprocess
import sys
from pathlib import Path

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


# Every script's --help in one interpreter (runpy, as `python SCRIPT --help` runs it): one
# torch import instead of one per script.
HELP_ALL = """
import contextlib, io, json, runpy, sys
failures = {}
for path in sys.argv[1:]:
    sys.argv = [path, "--help"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        failures[path] = "exited without printing help"
    except SystemExit as done:
        if done.code not in (0, None) or not out.getvalue().startswith("usage:"):
            failures[path] = f"exit {done.code}: {out.getvalue()[:300]}"
    except Exception as err:
        failures[path] = f"{type(err).__name__}: {err}"
print(json.dumps(failures))
"""


def test_every_script_answers_help():
    import json

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    paths = [str(EXPERIMENTS / script) for script in SCRIPTS]
    done = subprocess.run(
        [sys.executable, "-c", HELP_ALL, *paths],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    failures = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failures, failures
