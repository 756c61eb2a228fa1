"""Box-action classic control over 7 seeds: rlfw's PPO and A2C with and without gSDE, and
SB3 on rl-zoo's entry (which explores with gSDE on every one of them), run as ``rlfw
benchmark`` runs them (one process and core per run, two at once; 20 greedy evaluation
episodes of the final policy). Each run leaves its record under OUT/records, so a rerun
only runs what is missing and the table is rebuilt from the records; a record whose
settings differ from today's is refused by name.

    python experiments/bench/gsde_seeds.py                  # -> docs/benchmarks/gsde/
    python experiments/bench/gsde_seeds.py --report-only    # rebuild the table

Variants (settings on top of rlfw's preset for the env; SB3 runs the zoo's block):

- Pendulum-v1, 200k steps: ``normalized`` (the family preset, Pendulum's own until
  2026-12-05: observations and rewards normalized, plain Gaussian, Adam eps 1e-8);
  ``sde4`` (the same with gSDE every 4 steps); ``zoo-exact`` (the zoo's entry as written,
  today's preset: gSDE every 4 steps, no normalization, Adam eps 1e-5).
- MountainCarContinuous-v0: ``zoo-sde`` (the zoo's entry, today's preset: gSDE once per
  8-step rollout, 20k steps), ``zoo-nosde`` (the same with a plain Gaussian), and
  ``pendulum-settings`` (the Pendulum settings this env had before, 200k steps).
- A2C on Pendulum-v1, 200k steps: ``family`` (the family preset, Pendulum's own until
  2026-12-05: the zoo's entry without its gSDE and network settings) and ``zoo-exact``
  (the zoo's entry as written: gSDE drawn once per 8-step rollout, log-std -2, no
  orthogonal init); both again at the zoo's own budget, 1M steps (``family-1m``,
  ``zoo-exact-1m``; SB3's 1M runs are labelled ``1m``).
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from rlfw.bench.report import iqm_with_ci  # noqa: E402
from rlfw.bench.run import Job, finished, run_job  # noqa: E402

SEEDS = tuple(range(7))
_MCC_ZOO = (
    ("batch_B", "1"),
    ("batch_T", "8"),
    ("ppo.minibatch_size", "256"),
    ("ppo.gamma", "0.9999"),
    ("ppo.learning_rate", "7.77e-05"),
    ("ppo.entropy_coef", "0.00429"),
    ("ppo.clip", "0.1"),
    ("ppo.epochs", "10"),
    ("ppo.gae_lambda", "0.9"),
    ("ppo.max_grad_norm", "5"),
    ("ppo.value_coef", "0.19"),
    ("log_std_init", "-3.29"),
    ("ortho_init", "false"),
    ("ppo.optimizer_eps", "1e-5"),
)
_PENDULUM_SETTINGS = (
    ("batch_B", "4"),
    ("batch_T", "1024"),
    ("ppo.learning_rate", "1e-3"),
    ("ppo.gamma", "0.9"),
    ("ppo.gae_lambda", "0.95"),
    ("ppo.epochs", "10"),
    ("ppo.minibatch_size", "64"),
    ("ppo.clip", "0.2"),
    ("ppo.entropy_coef", "0.0"),
    ("ppo.max_grad_norm", "0.5"),
    ("ppo.optimizer_eps", "1e-8"),
    ("ppo.value_coef", "0.5"),
    ("log_std_init", "0.0"),
    ("ortho_init", "true"),
    ("sde_sample_freq", "0"),
)
# the family preset (what Pendulum had until 2026-12-05): normalized, Adam eps 1e-8
_NORMALIZED = (
    ("normalize_obs", "true"),
    ("ppo.normalize_reward", "true"),
    ("ppo.optimizer_eps", "1e-8"),
)
# A2C on Pendulum: the family preset, and the zoo's entry as written
_A2C_FAMILY = (("sde_sample_freq", "0"), ("log_std_init", "0.0"), ("ortho_init", "true"))
_A2C_ZOO_EXACT = (("sde_sample_freq", "8"), ("log_std_init", "-2.0"), ("ortho_init", "false"))
# (algo, env, label, steps, settings on top of today's preset)
VARIANTS = (
    ("ppo", "Pendulum-v1", "normalized", 200_000, _NORMALIZED + (("sde_sample_freq", "0"),)),
    ("ppo", "Pendulum-v1", "sde4", 200_000, _NORMALIZED + (("sde_sample_freq", "4"),)),
    (
        "ppo",
        "Pendulum-v1",
        "zoo-exact",
        200_000,
        (
            ("sde_sample_freq", "4"),
            ("normalize_obs", "false"),
            ("ppo.normalize_reward", "false"),
            ("ppo.optimizer_eps", "1e-5"),
        ),
    ),
    ("ppo", "MountainCarContinuous-v0", "zoo-sde", 20_000, _MCC_ZOO + (("sde_sample_freq", "8"),)),
    (
        "ppo",
        "MountainCarContinuous-v0",
        "zoo-nosde",
        20_000,
        _MCC_ZOO + (("sde_sample_freq", "0"),),
    ),
    ("ppo", "MountainCarContinuous-v0", "pendulum-settings", 200_000, _PENDULUM_SETTINGS),
    ("a2c", "Pendulum-v1", "family", 200_000, _A2C_FAMILY),
    ("a2c", "Pendulum-v1", "zoo-exact", 200_000, _A2C_ZOO_EXACT),
    ("a2c", "Pendulum-v1", "family-1m", 1_000_000, _A2C_FAMILY),
    ("a2c", "Pendulum-v1", "zoo-exact-1m", 1_000_000, _A2C_ZOO_EXACT),
)
# (algo, env, steps, label): the zoo's block, at its own budget (1M) under a label
SB3 = (
    ("ppo", "Pendulum-v1", 200_000, ""),
    ("ppo", "MountainCarContinuous-v0", 20_000, ""),
    ("a2c", "Pendulum-v1", 200_000, ""),
    ("a2c", "Pendulum-v1", 1_000_000, "1m"),
)


def jobs(seeds) -> list[Job]:
    out = [
        Job("rlfw", algo, env, steps, seed, settings=settings, label=label)
        for algo, env, label, steps, settings in VARIANTS
        for seed in seeds
    ]
    return out + [
        Job("sb3", algo, env, steps, seed, label=label)
        for algo, env, steps, label in SB3
        for seed in seeds
    ]


def table(results: list[tuple[Job, dict | None]]) -> str:
    rows = [
        "| env | run | steps | finals per seed | median | IQM [95% CI] |",
        "|---|---|---:|---|---:|---|",
    ]
    groups: dict[tuple, list] = {}
    for job, record in results:
        groups.setdefault((job.algo, job.env, job.framework, job.label, job.steps), []).append(
            record
        )
    for (algo, env, framework, label, steps), records in groups.items():
        done = [r for r in records if r and r.get("final_return") is not None]
        finals = [r["final_return"] for r in done]
        name = f"{algo} {framework} {label or ('preset' if framework == 'rlfw' else 'zoo')}"
        if not finals:
            rows.append(f"| {env} | {name} | {steps:,} | not run | | |")
            continue
        iqm, low, high = iqm_with_ci(finals)
        rows.append(
            f"| {env} | {name} | {steps:,} | {', '.join(f'{x:.1f}' for x in finals)}"
            f" | {np.median(finals):.1f} | {iqm:.1f} [{low:.1f}, {high:.1f}] |"
        )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks", "gsde"))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    todo = jobs(args.seeds)
    task = finished if args.report_only else run_job
    with ThreadPoolExecutor(2) as pool:
        results = list(zip(todo, pool.map(lambda job: task(job, args.out), todo)))
    text = table(results)
    print(text)
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(
            "# PPO and A2C on Box-action classic control over 7 seeds, with and without "
            "gSDE\n\n"
            "Written by `experiments/bench/gsde_seeds.py` from the records under "
            "`records/`; what the runs show: `docs/notes/2026-12-05-results-log.md`. "
            "Returns only: the runs were "
            "timed under other load (the classic suite times Pendulum and "
            "MountainCarContinuous quietly).\n\n" + text + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
