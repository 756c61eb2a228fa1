"""mkdocs hook: the pages generated from the code, filled in at every build so they cannot
go stale. A page holds a marker line; the hook puts the generated text in its place:

- ``<!-- generated: cli -->``: every ``rlfw`` subcommand's ``--help``, from its parser;
- ``<!-- generated: config -->``: every config key, from the fields' declarations;
- ``<!-- generated: headline -->``: the results table, from the committed results files.
"""

from __future__ import annotations

import argparse
import os


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


GENERATORS = {"cli": _cli, "config": _config, "headline": _headline}


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (mkdocs API)
    for name, make in GENERATORS.items():
        marker = f"<!-- generated: {name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
