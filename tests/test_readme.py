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
    done = subprocess.run(
        [sys.executable, str(path)], cwd=folder, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.integration
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
    assert (
        first.split("last eval return")[1].split(";")[0]
        == second.split("last eval return")[1].split(";")[0]
    )  # seeded: same result


def test_the_first_screen_holds_the_commands_the_script_and_the_results():
    first = README.read_text().splitlines()[:60]
    text = "\n".join(first)
    for needed in (
        "make run",
        "make test",
        "build_runner(config, log_dir)",
        "<!-- headline:end -->",
    ):
        assert needed in text, f"{needed!r} is not on the README's first 60 lines"
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b|p = 0\.", text), "dates or p-values up front"
    table = [line for line in first if line.startswith("| ")][1:]
    assert 1 <= len(table) <= 10


def test_every_number_in_the_results_table_comes_from_a_results_file():
    from rlfw.bench.headline import readme_block, table

    assert readme_block(README.read_text()) == table(), (
        "the README's table differs from the results files: python -m rlfw.bench.headline --write"
    )
