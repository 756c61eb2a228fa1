"""mkdocs hook: the pages generated from the code, filled in at every build so they cannot
go stale. A page holds a marker line; the hook puts the generated text in its place:

- ``<!-- generated: cli -->``: every ``rlfw`` subcommand's ``--help``, from its parser;
- ``<!-- generated: config -->``: every config key, from the fields' declarations;
- ``<!-- generated: headline -->``: the results table, from the committed results files;

and on an algorithm's page (``docs/algorithms/<name>.md``), markers naming the algorithm:

- ``<!-- generated: algo-settings NAME -->``: every key of its config, from the fields'
  declarations (``rlfw.launch.reference.algo_settings_markdown``);
- ``<!-- generated: algo-presets NAME -->``: its presets with their sources, from its preset
  table (``NAME_PRESETS`` beside its preset function), or, for a preset derived in code
  from another algorithm's, the function's docstring and what it gives per env family;
- ``<!-- generated: algo-benchmarks NAME -->``: its rows in the benchmark reports, read
  from each suite's ``results.json`` by ``rlfw.bench.headline`` (and the committed Pong
  runs), or a line saying no report has one.

A marker with a name the hook does not know fails the build.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

MARKER = re.compile(r"<!-- generated: ([a-z-]+)(?: ([A-Za-z0-9_-]+))? -->")


def _cli() -> str:
    from rlfw.cli import make_parser

    os.environ.setdefault("COLUMNS", "100")  # argparse wraps to the terminal's width
    parser = make_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    out = ["```text", parser.format_help().rstrip(), "```"]
    for name, command in sub.choices.items():
        out += ["", f"## rlfw {name}", "", "```text", command.format_help().rstrip(), "```"]
    return "\n".join(out)


def _config() -> str:
    from rlfw.launch.reference import reference_markdown

    return reference_markdown().split("\n", 1)[1]  # the page has its own title


def _headline() -> str:
    from rlfw.bench.headline import table

    # the README's links are from the repository's root; this page sits in docs/results/
    return table().replace("](docs/", "](../")


# -- an algorithm's page -------------------------------------------------------------------
def _algo_settings(name: str) -> str:
    from rlfw.launch.reference import algo_settings_markdown

    return algo_settings_markdown(name)


def _settings_cell(settings: dict[str, Any]) -> str:
    """A preset's settings as ``--set`` would take them, one code span per key."""
    from rlfw.launch.config import flatten, set_argument

    if not settings:
        return "(none: the config's defaults)"
    return " ".join(f"`{set_argument(k, v)}`" for k, v in flatten(settings)).replace("|", "\\|")


def _preset_tables() -> dict[str, tuple]:
    """Every registered algorithm's preset table that exists: ``NAME_PRESETS`` in the
    module of its preset function."""
    from rlfw.algos.preset_table import PresetEntry
    from rlfw.registry import ALGOS

    out = {}
    for spec in ALGOS:
        table = getattr(sys.modules[spec.preset.__module__], f"{spec.name.upper()}_PRESETS", None)
        if isinstance(table, tuple) and all(isinstance(e, PresetEntry) for e in table):
            out[spec.name] = table
    return out


def _algo_presets(name: str) -> str:
    from rlfw.envs.families import FAMILIES
    from rlfw.registry import ALGOS

    spec = ALGOS.get(name)
    tables = _preset_tables()
    where = f"`{spec.preset.__module__}`"
    if name in tables:
        table = tables[name]
        lines = [
            f"`{name.upper()}_PRESETS` in {where}, entry by entry: a run takes every entry "
            "that applies to its env, in this order (the family's, then the env's own), "
            "each merged over the last.",
            "",
            "| applies to | source | settings |",
            "|---|---|---|",
        ]
        for entry in table:
            envs = ", ".join(entry.families)
            if entry.env:
                envs = f"{entry.env} ({envs})"
            source = entry.source.replace("|", "\\|")
            lines.append(f"| {envs} | {source} | {_settings_cell(entry.settings)} |")
        covered = {f for entry in table for f in entry.families}
        rest = [f for f in FAMILIES if f not in covered]
        if rest:
            lines += ["", f"No entry for {', '.join(rest)}: those envs run the config's defaults."]
        return "\n".join(lines)
    # derived in code: its docstring is the source; what it gives, family by family (and
    # for each env another table tunes, where that changes the result)
    doc = " ".join((spec.preset.__doc__ or "").split())
    lines = [
        f"`{spec.preset.__name__}` in {where} derives them in code" + (f": {doc}" if doc else "."),
        "",
        "What it gives (env families with the same settings share a row):",
        "",
        "| applies to | settings |",
        "|---|---|",
    ]
    rows: list[tuple[list[str], dict]] = []
    for family in FAMILIES:
        settings = spec.preset("", family)
        same = [r for r in rows if r[1] == settings]
        if same:
            same[0][0].append(family)
        else:
            rows.append(([family], settings))
    envs = sorted(
        {(f, e.env) for t in tables.values() for e in t if e.env for f in e.families},
        key=lambda fe: (FAMILIES.index(fe[0]), fe[1]),
    )
    for family, env in envs:
        settings = spec.preset(env, family)
        if settings != spec.preset("", family):
            rows.append(([f"{env} ({family})"], settings))
    lines += [f"| {', '.join(label)} | {_settings_cell(s)} |" for label, s in rows]
    return "\n".join(lines)


def _algo_benchmarks(name: str) -> str:
    from rlfw.bench.headline import ROOT, ROWS, PongRow, SuiteRow, pong_row, suite_row

    rows = []
    for path in sorted((ROOT / "docs" / "benchmarks").glob("*/results.json")):
        data = json.loads(path.read_text())
        entries = data.get("entries", []) if isinstance(data, dict) else []
        for entry in entries:
            if entry.get("algo") == name:
                budget = f"{entry['steps']:,} steps" if entry.get("steps") else "its budget"
                row = SuiteRow(f"{entry['env']}, {budget}", path.parent.name, name, entry["env"])
                rows.append(suite_row(row))
    for row in ROWS:
        if isinstance(row, PongRow):
            first = ROOT / "docs" / "benchmarks" / "atari" / row.runs[0] / "config.json"
            if json.loads(first.read_text()).get("algo") == name:
                cells = pong_row(row)
                cells[0] = cells[0].removeprefix(f"{name.upper()}, ")  # the page names it
                rows.append(cells)
    if not rows:
        return f"No benchmark report's results file has a row for `{name}` yet."
    lines = [
        "| env, budget | rlfw: IQM [95% CI] | peer, same run | time vs peer | report |",
        "|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    # the rows' links are from the repository's root; these pages sit in docs/algorithms/
    return "\n".join(lines).replace("](docs/", "](../")


GENERATORS = {"cli": _cli, "config": _config, "headline": _headline}
ALGO_GENERATORS = {
    "algo-settings": _algo_settings,
    "algo-presets": _algo_presets,
    "algo-benchmarks": _algo_benchmarks,
}


def generate(name: str, argument: str | None = None) -> str:
    """The text that replaces the marker ``<!-- generated: name [argument] -->``."""
    if argument is None and name in GENERATORS:
        return GENERATORS[name]()
    if argument is not None and name in ALGO_GENERATORS:
        return ALGO_GENERATORS[name](argument)
    raise ValueError(f"no generator for <!-- generated: {name} {argument or ''} -->")


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (mkdocs API)
    return MARKER.sub(lambda m: generate(m.group(1), m.group(2)), markdown)
