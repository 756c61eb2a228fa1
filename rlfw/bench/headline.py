"""The README's results table, made from the committed results files (never typed): each
row names a benchmark entry, and its numbers are read from that suite's ``results.json``
(or, for Pong, the committed runs' ``progress.csv``).

    python -m rlfw.bench.headline            # print the table
    python -m rlfw.bench.headline --write    # put it into README.md between its markers
"""

from __future__ import annotations

import argparse
import csv
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlfw.bench.report import iqm_cell

ROOT = Path(__file__).parents[2]
START, END = "<!-- headline:start -->", "<!-- headline:end -->"


@dataclass(frozen=True)
class SuiteRow:
    """One entry of a benchmark suite's results.json."""

    claim: str
    suite: str
    algo: str
    env: str


@dataclass(frozen=True)
class PongRow:
    """The committed Pong runs: their final evaluation and minutes, from progress.csv."""

    claim: str
    runs: tuple[str, ...]


ROWS: tuple[SuiteRow | PongRow, ...] = (
    SuiteRow("PPO, CartPole-v1, 120k steps", "classic", "ppo", "CartPole-v1"),
    SuiteRow("DQN, CartPole-v1, 120k steps", "classic", "dqn", "CartPole-v1"),
    SuiteRow("PPO, HalfCheetah-v5, 300k steps", "mujoco", "ppo", "HalfCheetah-v5"),
    SuiteRow("SAC, HalfCheetah-v5, 100k steps", "mujoco-offpolicy", "sac", "HalfCheetah-v5"),
    SuiteRow("PPO, MinAtar Breakout, 2M steps", "minatar", "ppo", "MinAtar/Breakout-v1"),
    SuiteRow("PPO, MinAtar SpaceInvaders, 2M steps", "minatar", "ppo", "MinAtar/SpaceInvaders-v1"),
    SuiteRow("PPO, MinAtar Asterix, 2M steps", "minatar", "ppo", "MinAtar/Asterix-v1"),
    SuiteRow("DQN, MinAtar Breakout, 250k steps", "minatar", "dqn", "MinAtar/Breakout-v1"),
    SuiteRow("PPO, MiniGrid DoorKey-5x5 (Dict), 100k", "spaces", "ppo", "MiniGrid-DoorKey-5x5-v0"),
    PongRow(
        "PPO, Atari Pong, 10M frames, 2 cores",
        ("ppo-pong-10M-e8-bf16-seed0", "ppo-pong-10M-e8-bf16-seed1", "ppo-pong-10M-e8-bf16-seed2"),
    ),
)


def _iqm(stats: dict[str, Any], decimals: int = 1) -> str:
    if "iqm" not in stats:  # the suite's runs of this entry are still to come
        return "not run yet"
    return f"{iqm_cell(stats, decimals)}, {len(stats['finals'])} seeds"


def suite_row(row: SuiteRow, root: Path = ROOT) -> list[str]:
    folder = root / "docs" / "benchmarks" / row.suite
    data = json.loads((folder / "results.json").read_text())
    (entry,) = [e for e in data["entries"] if (e["algo"], e["env"]) == (row.algo, row.env)]
    ours, peer = entry["frameworks"]["rlfw"], entry["frameworks"].get("sb3")
    ratio = (entry.get("goals") or {}).get("time_ratio")
    decimals = data.get("decimals", 1)
    return [
        row.claim,
        _iqm(ours, decimals),
        "—" if peer is None else f"SB3 {_iqm(peer, decimals)}",
        "—" if ratio is None else f"{ratio:.2f}×",
        f"[{row.suite}](docs/benchmarks/{row.suite}/README.md)",
    ]


def pong_row(row: PongRow, root: Path = ROOT) -> list[str]:
    finals, minutes = [], []
    for name in row.runs:
        with open(root / "docs" / "benchmarks" / "atari" / name / "progress.csv") as f:
            evals = [r for r in csv.DictReader(f) if r.get("eval/return_mean")]
        finals.append(float(evals[-1]["eval/return_mean"]))
        minutes.append(float(evals[-1]["time/elapsed_s"]) / 60)
    seeds = ", ".join(f"{r:.1f}" for r in finals)
    return [
        row.claim,
        f"{seeds} (seeds 0-{len(finals) - 1}), {min(minutes):.0f}-{max(minutes):.0f} min",
        "—",
        "—",
        "[atari](docs/benchmarks/atari/README.md)",
    ]


def table(root: Path = ROOT) -> str:
    lines = [
        "| result | rlfw: IQM [95% CI] | peer, same run | time vs peer | report |",
        "|---|---|---|---|---|",
    ]
    for row in ROWS:
        cells = suite_row(row, root) if isinstance(row, SuiteRow) else pong_row(row, root)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def readme_block(readme: str) -> str:
    """The table as it stands in ``readme`` (between the markers)."""
    if START not in readme or END not in readme:
        raise ValueError(f"README.md has no {START} ... {END} block")
    return readme.split(START, 1)[1].split(END, 1)[0].strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--write", action="store_true", help="replace the table in README.md instead of printing it"
    )
    args = parser.parse_args()
    text = table()
    if not args.write:
        print(text)
        return
    path = ROOT / "README.md"
    readme = path.read_text()
    readme_block(readme)  # the markers are there
    before, rest = readme.split(START, 1)
    after = rest.split(END, 1)[1]
    path.write_text(f"{before}{START}\n{text}\n{END}{after}")
    print(f"headline: {os.path.relpath(path)} updated")


if __name__ == "__main__":
    main()
