"""Everything rlfw does on a GPU, checked in one command (sized for about 6 minutes on one
GPU; not yet run on one), with one table as the result; written to --out as README.md and
results.json (default docs/gpu; a smoke run writes to a fresh temp folder and never into
docs/, where real results belong).

    python experiments/gpu_check.py                          # on the machine with CUDA
    python experiments/gpu_check.py --device cpu --smoke     # < 1 min: the test runs it

On the device tool's machine (no network, its own torch): ``experiments/gpu_wheels.py``
fetches the other dependencies as wheels and prints the command that runs this there.

Rows:
  1. the gpu and alternating samplers with the agent on the device: env steps/s against the
     serial sampler with the same agent, and their samples equal to the serial sampler's
     (same seed, same device agent);
  2. PPO with the learner on the device: sync, concurrent and async runner steps/s
     (HTS-RL's claim: concurrent >= 1.3x sync once the learner has its own device), plus the
     sync runner with AMP bf16 and with a compiled loss;
  3. DQN with the async runner (Atari replay in shared memory, learner on the device);
  4. torchrun: 1 rank (NCCL on a GPU) and 2 ranks on the one device (gloo: NCCL refuses two
     ranks on one GPU);
  5. SAC and TD3 against stable-baselines3's, both on the device: ms per env step at one
     update per step (experiments/bench/offpolicy_vs_sb3.py; issue 58's goal: <= 0.5x SB3),
     and rlfw's SAC with TF32 matmuls (matmul_precision=high);
  6. peak device memory of this process.
A row that fails keeps its error in the table; the script exits 1 if any did.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable

import torch

from rlfw.envs import EnvSpaces
from rlfw.launch.build import build_agent, build_runner, build_sampler
from rlfw.launch.config import RunConfig
from rlfw.runfolder.files import write_json, write_text
from rlfw.samplers.machinery.throughput import measure_steps_per_second

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench"))
from offpolicy_vs_sb3 import rlfw_ms_per_step, sb3_ms_per_step  # noqa: E402

SAMPLE_FIELDS = ("observation", "action", "reward", "terminated", "truncated")


class Size:
    """How big each check is: the real one, or the smoke one the test runs on CPU."""

    def __init__(self, smoke: bool, env: str | None = None):
        self.smoke = smoke
        self.env = env or ("CartPole-v1" if smoke else "ALE/Pong-v5")
        self.batch_B, self.batch_T = (4, 16) if smoke else (16, 128)
        self.sampler_seconds = 0.5 if smoke else 10.0
        self.ppo_itrs = 2 if smoke else 24
        self.dqn_itrs = 4 if smoke else 400
        self.rank_steps = 512 if smoke else 16_384
        self.offpolicy_env = "Pendulum-v1" if smoke else "HalfCheetah-v5"
        self.offpolicy_warmup, self.offpolicy_steps = (64, 32) if smoke else (1000, 1500)


def config_for(size: Size, algo: str, device: str, **overrides) -> RunConfig:
    config = RunConfig.for_env(
        size.env, algo, **{"batch_B": size.batch_B, "device": device, **overrides}
    )
    config.n_workers = 2  # for the samplers with workers that the checks switch to
    config.schedule.eval_every = None
    config.schedule.log_every = 10**9
    return config


def check_samplers(size: Size, device: str) -> list[dict]:
    rows = []
    base = config_for(size, "ppo", device, batch_T=size.batch_T)
    env_factory = base.env_factory()
    agent = build_agent(base, EnvSpaces.of(env_factory))
    reference = None
    serial_rate = None
    for kind in ("serial", "gpu", "alternating"):
        config = base.replaced(sampler=kind)
        sampler = build_sampler(config, env_factory)
        try:
            sampler.initialize(agent)
            samples, _ = sampler.obtain_samples(0)
            got = {f: getattr(samples, f).clone() for f in SAMPLE_FIELDS}
        finally:
            sampler.close()
        if reference is None:
            reference = got
        equal = all(torch.equal(reference[f], got[f]) for f in SAMPLE_FIELDS)
        rate = measure_steps_per_second(
            build_sampler(config, env_factory), agent, size.sampler_seconds
        )
        serial_rate = serial_rate or rate
        rows.append(
            {
                "check": f"sampler {kind}",
                "ok": equal,
                "result": f"{rate:,.0f} env steps/s ({rate / serial_rate:.2f}x serial); "
                f"samples {'equal' if equal else 'DIFFER from'} serial's",
            }
        )
    return rows


def timed_run(config: RunConfig) -> float:
    """Env steps/s of a whole run (no log folder: nothing written)."""
    with build_runner(config, None, progress=False, stdout=False) as runner:
        start = time.perf_counter()
        result = runner.train()
    return result.env_steps / (time.perf_counter() - start)


def check_ppo_runners(size: Size, device: str) -> list[dict]:
    rows, rates = [], {}
    steps = size.ppo_itrs * size.batch_B * size.batch_T
    variants = [
        ("sync", {}),
        ("concurrent", {}),
        ("async", {}),
        ("sync", {"ppo": {"amp": None}}),
        ("sync", {"ppo": {"amp": "bf16"}}),
        ("sync", {"ppo": {"compile": True}}),
    ]  # amp both ways: Atari's preset is bf16
    # One iteration untimed first: the process's one-time costs (kernels loaded, thread
    # pools, caches) would otherwise all land on the first timed run, sync, and inflate
    # every ratio to it.
    one_batch = {"n_steps": size.batch_B * size.batch_T}
    timed_run(config_for(size, "ppo", device, batch_T=size.batch_T, schedule=one_batch))
    for runner_kind, extra in variants:
        label = runner_kind + "".join(f" {k}={v}" for d in extra.values() for k, v in d.items())
        config = config_for(
            size,
            "ppo",
            device,
            batch_T=size.batch_T,
            runner=runner_kind,
            schedule={"n_steps": steps},
            **extra,
        )
        rates[label] = rate = timed_run(config)
        rows.append(
            {
                "check": f"ppo {label}",
                "ok": rate > 0,
                "result": f"{rate:,.0f} env steps/s"
                + (f" ({rate / rates['sync']:.2f}x sync)" if label != "sync" else ""),
            }
        )
    ratio = rates["concurrent"] / rates["sync"]
    rows.append(
        {
            "check": "HTS-RL: concurrent >= 1.3x sync",
            "ok": True,
            "result": f"{ratio:.2f}x ({'met' if ratio >= 1.3 else 'not met'})",
        }
    )
    return rows


def check_dqn_async(size: Size, device: str) -> list[dict]:
    steps = size.dqn_itrs * 8 * 4
    config = config_for(
        size,
        "dqn",
        device,
        runner="async",
        batch_B=8,
        batch_T=4,
        schedule={"n_steps": steps},
        dqn={"learning_starts": steps // 4, "replay_capacity": 50_000},
    )
    rate = timed_run(config)
    return [{"check": "dqn async", "ok": rate > 0, "result": f"{rate:,.0f} env steps/s"}]


def check_ranks(size: Size, device: str, work: str) -> list[dict]:
    rows = []
    for n in (1, 2):
        run_dir = os.path.join(work, f"ranks{n}")
        # torchrun's log folder in the work dir: by default it makes a new one in the
        # system's temp dir per launch and never removes it
        argv = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={n}",
            "--log-dir",
            os.path.join(work, f"torchrun{n}"),
            "-m",
            "rlfw",
            "train",
            "--env",
            size.env,
            "--algo",
            "ppo",
            "--steps",
            str(size.rank_steps * n),
            "--device",
            device,
            "--batch-B",
            str(size.batch_B),
            "--log-dir",
            run_dir,
            "--no-progress",
            "--set",
            "schedule.eval_every=None",
        ]
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        seconds = time.perf_counter() - start
        backend = "nccl" if device.startswith("cuda") and n == 1 else "gloo"
        ok = done.returncode == 0
        rows.append(
            {
                "check": f"torchrun {n} rank(s), {backend}",
                "ok": ok,
                "result": (
                    f"{size.rank_steps * n / seconds:,.0f} env steps/s with start-up"
                    if ok
                    else f"exit {done.returncode}: {done.stderr[-400:]}"
                ),
            }
        )
    return rows


def check_offpolicy(size: Size, device: str) -> list[dict]:
    """One update per env step, both frameworks' networks on the device (the env on the
    CPU for both); rlfw first, so its figure survives a missing or failing peer."""
    rows = []
    timing = (size.offpolicy_env, size.offpolicy_warmup, size.offpolicy_steps, 0)
    for algo in ("sac", "td3"):
        ours = rlfw_ms_per_step(algo, *timing, device=device)
        rows.append({"check": f"{algo} rlfw", "ok": True, "result": f"{ours:.2f} ms/env step"})
        try:
            theirs = sb3_ms_per_step(algo, *timing, device=device)
        except Exception as err:  # the peer's failure is its own row
            rows.append({"check": f"{algo} sb3", "ok": False, "result": f"{err!r}"[:300]})
            continue
        ratio = ours / theirs
        rows.append(
            {
                "check": f"{algo} sb3",
                "ok": True,
                "result": f"{theirs:.2f} ms/env step; rlfw/SB3 {ratio:.2f}x "
                f"(goal <= 0.5x: {'met' if ratio <= 0.5 else 'not met'})",
            }
        )
    tf32 = rlfw_ms_per_step("sac", *timing, precision="high", device=device)
    rows.append(
        {"check": "sac rlfw matmul_precision=high", "ok": True, "result": f"{tf32:.2f} ms/env step"}
    )
    return rows


def run_checks(
    size: Size, device: str, work: str, after_each: Callable[[list[dict]], None] | None = None
) -> list[dict]:
    """Every check's rows; ``after_each`` gets the rows so far after each check (the table
    is written as it grows: a run stopped at the device's time limit keeps what it did)."""
    rows = []
    checks = [
        ("samplers", lambda: check_samplers(size, device)),
        ("ppo runners", lambda: check_ppo_runners(size, device)),
        ("dqn async", lambda: check_dqn_async(size, device)),
        ("torchrun", lambda: check_ranks(size, device, work)),
        ("sac/td3 against sb3", lambda: check_offpolicy(size, device)),
    ]
    for name, check in checks:
        started = time.perf_counter()
        try:
            got = check()
        except Exception as err:  # the table says what failed; the others still run
            got = [
                {
                    "check": name,
                    "ok": False,
                    "result": f"{type(err).__name__}: {err}".splitlines()[0],
                    "traceback": traceback.format_exc(),
                }
            ]
        for row in got:
            row["seconds"] = round(time.perf_counter() - started, 1)
        rows += got
        print(
            "\n".join(
                f"{r['check']:<36} {'ok ' if r['ok'] else 'FAIL'} {r['result']}" for r in got
            ),
            flush=True,
        )
        if after_each is not None:
            after_each(rows)
    if device.startswith("cuda"):
        peak = torch.cuda.max_memory_allocated() / 2**30
        rows.append(
            {"check": "peak device memory (this process)", "ok": True, "result": f"{peak:.2f} GiB"}
        )
    return rows


def write(rows: list[dict], device: str, size: Size, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    meta = {
        "device": device,
        "device_name": name,
        "torch": torch.__version__,
        "smoke": size.smoke,
        "env": size.env,
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    write_json(os.path.join(out, "results.json"), {**meta, "rows": rows})
    lines = [
        f"# GPU check ({name}, torch {torch.__version__}, {meta['date']})",
        "",
        f"`python experiments/gpu_check.py{' --smoke' if size.smoke else ''} --env {size.env}"
        f"{'' if device == 'cuda' else ' --device ' + device}`; "
        f"{size.batch_B} envs x {size.batch_T} steps; SAC and TD3 on {size.offpolicy_env}, "
        f"{size.offpolicy_steps} timed steps after {size.offpolicy_warmup} of warm-up.",
        "",
        "| check | ok | result | s |",
        "|---|---|---|---:|",
    ]
    lines += [
        f"| {r['check']} | {'yes' if r['ok'] else '**no**'} | {r['result']} | "
        f"{r.get('seconds', '')} |"
        for r in rows
    ]
    write_text(os.path.join(out, "README.md"), "\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (CartPole)")
    parser.add_argument(
        "--env",
        default=None,
        help="the env of rows 1-4 (default ALE/Pong-v5; with --smoke CartPole-v1); "
        "MinAtar/Breakout-v1 where OpenCV, which Atari's frame resize needs, is missing",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="README.md and results.json here (default docs/gpu; with --smoke a new temp folder)",
    )
    args = parser.parse_args()
    docs = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs"))
    if args.smoke and args.out and os.path.realpath(args.out).startswith(docs + os.sep):
        parser.error(
            f"--smoke results are not results: --out {args.out} is under {docs}; "
            "leave --out unset (a temp folder) or choose a folder outside docs/"
        )
    if args.out is None:
        args.out = tempfile.mkdtemp(prefix="rlfw-gpu-check-") if args.smoke else "docs/gpu"
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda but torch sees no GPU; on this machine use --device cpu")
    size = Size(args.smoke, args.env)
    with tempfile.TemporaryDirectory() as work:
        rows = run_checks(
            size, args.device, work, lambda so_far: write(so_far, args.device, size, args.out)
        )
    write(rows, args.device, size, args.out)
    print(f"gpu_check: {sum(r['ok'] for r in rows)}/{len(rows)} ok -> {args.out}/README.md")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
