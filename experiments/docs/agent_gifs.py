"""A GIF of a trained agent for each entry of an existing benchmark report, without
re-running the benchmark: rlfw seed 0 of each entry is trained again exactly as
``rlfw benchmark`` trains it (same preset, budget and seed, one torch thread), its final
policy is checked against the report's seed-0 return (same 20 evaluation episodes), and one
evaluation episode is written as ``agent_<entry>.gif`` next to the report, which is then
rewritten from its results.json with the GIFs in. Where today's code trains a different
policy than the report's (its run came from an earlier commit), the caption says so and
gives both returns.

    python experiments/docs/agent_gifs.py --suite classic        # docs/benchmarks/classic

New benchmark runs record the GIF themselves (``rlfw.bench.job``); this is for
reports whose run folders are gone (they are not committed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np
import torch

from rlfw.bench.job import run_rlfw
from rlfw.bench.report import _agent_gif, markdown
from rlfw.bench.run import Job
from rlfw.bench.suites import SUITES
from rlfw.runfolder.files import write_json, write_text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--suite", required=True, choices=sorted(SUITES))
    parser.add_argument(
        "--out", default=None, help="the report's folder (default docs/benchmarks/SUITE)"
    )
    parser.add_argument(
        "--entries",
        nargs="+",
        default=None,
        help="only these entries (e.g. ppo-Acrobot-v1; default all)",
    )
    args = parser.parse_args()
    out = args.out or os.path.join("docs", "benchmarks", args.suite)
    with open(os.path.join(out, "results.json")) as f:
        data = json.load(f)
    torch.set_num_threads(1)  # as each benchmark run
    for entry, saved in zip(SUITES[args.suite].entries, data["entries"]):
        if args.entries and entry.name not in args.entries:
            continue
        job = Job("rlfw", entry.algo, entry.env, entry.budget, 0)
        with tempfile.TemporaryDirectory() as work:
            result = {**vars(job), **run_rlfw(job, work)}
            final = float(np.mean(result["returns"]))
            reported = dict(
                zip(saved["frameworks"]["rlfw"]["seeds"], saved["frameworks"]["rlfw"]["finals"])
            ).get(0)
            same = reported is not None and np.isclose(final, reported)
            print(
                f"{entry.name}: seed 0 final {final:.2f}, report {reported}: "
                f"{'the same policy' if same else 'DIFFERS'}",
                flush=True,
            )
            saved["gif"] = _agent_gif(entry, [result], out)
            if saved["gif"] is not None and not same:
                saved["gif"]["about"] += (
                    f"; retrained with this commit's code: final return {final:.1f} over the "
                    f"report's 20 evaluation episodes, where the report's seed-0 run scored "
                    f"{reported:.1f} (not the same bits)"
                )
    write_json(os.path.join(out, "results.json"), data)
    write_text(os.path.join(out, "README.md"), markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
