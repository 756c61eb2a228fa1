"""The manual builds with no warning (mkdocs --strict: a dead link, a missing page or a
broken anchor fails), and its generated pages hold what the code declares."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs", reason="the [docs] extra")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


@pytest.mark.integration
def test_the_manual_builds_strict(site):
    for page in (
        "index.html",
        "getting-started/index.html",
        "concepts/index.html",
        "howto/callbacks/index.html",
        "reference/api/index.html",
    ):
        assert (site / page).is_file(), page


@pytest.mark.integration
def test_generated_pages_come_from_the_code(site):
    from rlfw.bench.headline import table
    from rlfw.launch.reference import key_docs
    from rlfw.registry import ALGOS

    own = [a.name for a in ALGOS if a.config_cls.__module__.startswith("rlfw.")]  # not tests'
    config = (site / "reference" / "config" / "index.html").read_text()
    missing = [d.key for d in key_docs(own) if d.key not in config]
    assert not missing, missing
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "rlfw export" in cli and "--help-config" in cli
    results = (site / "results" / "index.html").read_text()
    first_row = table().splitlines()[2].split(" | ")[1]
    assert first_row in results
    api = (site / "reference" / "api" / "index.html").read_text()
    assert "for_env" in api and "on_iteration" in api


def test_the_benchmarks_page_lists_every_suite():
    from rlfw.bench.suites import SUITES

    page = (ROOT / "docs" / "benchmarks" / "README.md").read_text()
    missing = [name for name in SUITES if f"| `{name}` |" not in page]
    assert not missing, missing


def _own_algos() -> list:
    """rlfw's own algorithms (a test plugin's registrations are not the manual's)."""
    from rlfw.registry import ALGOS

    return [a for a in ALGOS if a.config_cls.__module__.startswith("rlfw.")]


def test_every_algorithm_has_a_page_with_its_generated_settings():
    import dataclasses

    from rlfw.launch.reference import algo_settings_markdown

    index = (ROOT / "docs" / "algorithms" / "index.md").read_text()
    nav = (ROOT / "mkdocs.yml").read_text()
    for spec in _own_algos():
        path = ROOT / "docs" / "algorithms" / f"{spec.name}.md"
        assert path.is_file(), f"{spec.name} has no page: write docs/algorithms/{spec.name}.md"
        page = path.read_text()
        for part in ("algo-settings", "algo-presets", "algo-benchmarks"):
            marker = f"<!-- generated: {part} {spec.name} -->"
            assert marker in page, f"{path.name} lacks {marker}"
        assert f"]({spec.name}.md)" in index, f"docs/algorithms/index.md does not link {spec.name}"
        assert f"algorithms/{spec.name}.md" in nav, f"mkdocs.yml's nav lacks {spec.name}'s page"
        table = algo_settings_markdown(spec.name)
        missing = [
            f.name
            for f in dataclasses.fields(spec.config_cls)
            if f"| `{spec.name}.{f.name}` |" not in table
        ]
        assert not missing, (spec.name, missing)


@pytest.mark.integration
def test_the_algorithm_pages_are_generated(site):
    import dataclasses
    import json

    own = _own_algos()
    results = [
        json.loads(p.read_text()) for p in (ROOT / "docs" / "benchmarks").glob("*/results.json")
    ]
    rows = [e for r in results for e in r.get("entries", []) if isinstance(e, dict)]
    for spec in own:
        page = (site / "algorithms" / spec.name / "index.html").read_text()
        assert "generated:" not in page, f"{spec.name}: a marker was left unfilled"
        missing = [
            f.name
            for f in dataclasses.fields(spec.config_cls)
            if f"<code>{spec.name}.{f.name}</code>" not in page
        ]
        assert not missing, (spec.name, missing)
        envs = [e["env"] for e in rows if e.get("algo") == spec.name]
        assert all(env in page for env in envs), (spec.name, envs)
        if not envs:
            assert "No benchmark report" in page, spec.name
