"""The README's script works as printed, after its one-line sampler swap, and twice."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_script() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1, "the README holds one Python script"
    return blocks[0].replace("steps=100_000", "steps=1_024")  # same code, shorter run


def run_script(code: str, folder: Path) -> str:
    path = folder / "script.py"
    path.write_text(code)
    done = subprocess.run([sys.executable, str(path)], cwd=folder, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("swap", [False, True])
def test_readme_script_runs_as_printed_and_after_the_swap(tmp_path, swap):
    code = readme_script()
    if swap:
        serial = re.search(r'^ *config.sampler = "serial".*$', code, re.M).group(0)
        parallel = re.search(r'^ *# (config.sampler = "cpu".*)$', code, re.M)
        code = code.replace(serial, "    " + parallel.group(1))
    first = run_script(code, tmp_path)
    assert "last eval return" in first
    if swap:
        return
    second = run_script(code, tmp_path)  # a second run gets its own folder
    folders = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(folders) == 2, folders
    assert first.split("last eval return")[1].split(";")[0] == \
        second.split("last eval return")[1].split(";")[0]  # seeded: same result
