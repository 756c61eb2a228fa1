"""One benchmark run, in a process of its own: ``python -m rlfw.bench.job
JOB_JSON RUN_DIR``. Trains one framework on one (algo, env, budget, seed), evaluates the
final policy the way every framework is evaluated here, and writes ``result.json``.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import shutil
import sys
from typing import TYPE_CHECKING, Any, Callable, cast

import numpy as np
import torch

from rlfw.bench.clock import RunClock
from rlfw.bench.report import Record
from rlfw.bench.run import (
    EVAL_EPISODES,
    EVAL_SEED_OFFSET,
    RESULT_FILE,
    SETTINGS_FIELD,
    Job,
    config_settings,
    job_config,
    job_settings,
)
from rlfw.bench.zoo import zoo_hyperparams_file
from rlfw.runfolder.folder_lock import FolderLock

if TYPE_CHECKING:  # optional (extra [bench]), imported where used
    import gymnasium as gym
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecEnv

# evaluate_policy's answer with return_episode_rewards=True: per-episode returns and lengths
EpisodeRewards = tuple[list[float], list[int]]


def fresh_run_folder(path: str) -> None:
    """Clear what an interrupted attempt left in ``path`` (a benchmark run is never resumed:
    its seconds would restart); a folder a live run holds is refused (``FolderBusyError``)."""
    if os.path.lexists(path):
        with FolderLock.acquire(path):
            shutil.rmtree(path)


def run_rlfw(job: Job, run_dir: str) -> Record:
    """rlfw's preset, exactly as ``rlfw train --algo A --env E --steps N --seed S`` builds
    it, without evaluations during training (SB3 runs none either)."""
    from rlfw.launch.build import build_runner
    from rlfw.launch.evaluate import evaluate_checkpoint
    from rlfw.launch.plugins import import_plugins

    config = job_config(job)
    # A job's settings are the benchmark's own (its code or command line, never a file
    # read back), so the modules they name may run, as `--plugin` on `rlfw train`.
    import_plugins(config.plugins)
    run_dir = os.path.join(run_dir, "run")
    fresh_run_folder(run_dir)
    # A process's first torch optimizer imports torch._dynamo (about 1 s here). The SB3
    # peer pays that building its model, before its clock starts; rlfw's runner builds
    # its optimizer inside train(): the import is paid here, outside the clock, alike.
    import torch._dynamo  # noqa: F401

    with build_runner(config, run_dir, progress=False, stdout=False) as runner:
        with RunClock() as clock:
            result = runner.train()
    if result.interrupted or result.env_steps < job.steps:
        # A stopped run (Ctrl-C, SIGTERM) ends its training cleanly, but its numbers are
        # a partial run's: no result, so a re-run of the suite starts it again.
        raise SystemExit(
            f"rlfw benchmark: {job.framework} {job.algo} {job.env} seed {job.seed} stopped "
            f"at {result.env_steps} of {job.steps} env steps; no result written"
        )
    returns = evaluate_checkpoint(
        run_dir, EVAL_EPISODES, greedy=True, seed=EVAL_SEED_OFFSET + job.seed
    )
    with open(os.path.join(run_dir, "progress.csv"), newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("rollout/return_mean")]
    curve = [(int(float(r["step"])), float(r["rollout/return_mean"])) for r in rows]
    # the same points against training seconds (rows logged before this run's resume
    # would restart the clock; a benchmark run is never resumed)
    curve_s = [
        (float(r["time/elapsed_s"]), float(r["rollout/return_mean"]))
        for r in rows
        if r.get("time/elapsed_s")
    ]
    lags = [float(r["train/policy_lag"]) for r in rows if r.get("train/policy_lag")]
    gif = agent_gif(run_dir, job.seed) if job.seed == 0 and not job.label else None
    return {
        "wall_s": clock.wall_s,
        "wait_share": clock.wait_share,
        "env_steps": result.env_steps,
        "returns": returns.tolist(),
        "curve": curve,
        "curve_s": curve_s,
        "policy_lag": sum(lags) / len(lags) if lags else None,
        "settings": "rlfw preset (RunConfig.for_env)"
        + "".join(f", {k}={v}" for k, v in job.settings),
        "gif": gif,
        SETTINGS_FIELD: config_settings(config),
    }


def agent_gif(run_dir: str, seed: int) -> str | None:
    """One evaluation episode of the run's final policy as a GIF (for the report), or None
    where the env does not render here (the [video] extra missing, MuJoCo without OpenGL)."""
    from rlfw.launch.evaluate import evaluate_checkpoint

    videos = os.path.join(run_dir, "videos")
    try:
        evaluate_checkpoint(run_dir, 1, greedy=True, seed=EVAL_SEED_OFFSET + seed, video_dir=videos)
    except Exception as err:  # a picture is optional; the benchmark's numbers are not
        print(f"benchmark: no GIF of {run_dir}: {type(err).__name__}: {err}", file=sys.stderr)
        return None
    found = sorted(glob.glob(os.path.join(videos, "*.gif")))
    return found[0] if found else None


def run_sb3(job: Job, run_dir: str) -> Record:
    """stable-baselines3 through rl-baselines3-zoo's ExperimentManager (its wrappers,
    normalization, schedules and policy settings for the env), without evaluations during
    training; the final policy with its normalization statistics frozen."""
    import argparse

    from rl_zoo3.exp_manager import ExperimentManager
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    config, key = zoo_hyperparams_file(job.algo, job.env, run_dir)
    args = argparse.Namespace(algo=job.algo, env=job.env, seed=job.seed, n_timesteps=job.steps)
    manager = ExperimentManager(
        args,
        job.algo,
        job.env,
        os.path.join(run_dir, "zoo"),
        n_timesteps=job.steps,
        eval_freq=-1,
        seed=job.seed,
        verbose=0,
        device="cpu",
        config=config,
        log_interval=-2,
    )
    # None only while optimizing hyper-parameters, which this manager is not asked to do
    model, _ = cast("tuple[BaseAlgorithm, dict[str, Any]]", manager.setup_experiment())
    with RunClock() as clock:
        manager.learn(model)
    manager.save_trained_model(model)
    manager.seed = EVAL_SEED_OFFSET + job.seed
    eval_env = manager.create_envs(1, eval_env=True, no_log=True)
    trained = model.get_vec_normalize_env()
    if isinstance(eval_env, VecNormalize) and trained is not None:
        eval_env.obs_rms = trained.obs_rms  # the statistics training ended with, frozen
        eval_env.training, eval_env.norm_reward = False, False
    returns, _ = cast(
        EpisodeRewards,
        evaluate_policy(
            model,
            eval_env,
            n_eval_episodes=EVAL_EPISODES,
            deterministic=True,
            return_episode_rewards=True,
        ),
    )
    eval_env.close()
    return {
        "wall_s": clock.wall_s,
        "wait_share": clock.wait_share,
        "env_steps": int(model.num_timesteps),
        "returns": [float(r) for r in returns],
        "curve": _monitor_curve(manager.save_path),
        "settings": f"rl-baselines3-zoo {job.algo}.yml [{key}]",
        SETTINGS_FIELD: job_settings(job),
    }


def _monitor_curve(folder: str) -> list[tuple[int, float]]:
    """Training episodes from the zoo's Monitor files: (env steps so far, return), the
    environments' episodes merged in time order."""
    episodes = []
    for path in glob.glob(os.path.join(folder, "*monitor.csv")):
        with open(path) as f:
            f.readline()  # the Monitor's JSON header
            episodes += [(float(r["t"]), int(r["l"]), float(r["r"])) for r in csv.DictReader(f)]
    episodes.sort()
    steps = np.cumsum([length for _, length, _ in episodes])
    return [(int(s), r) for s, (_, _, r) in zip(steps, episodes)]


def sb3_same_model(
    job: Job, monitor_dir: str | None = None
) -> tuple[BaseAlgorithm, VecEnv, gym.Space[Any]]:
    """(SB3's model on rlfw's preset settings and network, its training envs, rlfw's
    observation space of the env) for ``job``, episodes logged to ``monitor_dir``."""
    from stable_baselines3.common.env_util import make_vec_env

    from rlfw.bench.same_settings import sb3_env, sb3_model

    config = job_config(job)
    factory = config.env_factory().resolved()
    probe = factory(True)
    rlfw_space = probe.observation_space
    probe.close()
    envs = make_vec_env(
        lambda: sb3_env(config, factory, True),
        n_envs=config.batch_B,
        seed=job.seed,
        monitor_dir=monitor_dir,
    )
    return sb3_model(config, envs, job.seed, rlfw_space), envs, rlfw_space


def run_sb3_same(job: Job, run_dir: str) -> Record:
    """stable-baselines3 with rlfw's preset settings and network (``same_settings``), on
    rlfw's envs, for suites the zoo has no settings for; evaluated like ``run_sb3`` (with
    the mask, where the env has one)."""
    from stable_baselines3.common.env_util import make_vec_env

    from rlfw.bench.same_settings import is_masked, sb3_env

    config = job_config(job)
    factory = config.env_factory().resolved()
    monitors = os.path.join(run_dir, "monitor")
    model, envs, rlfw_space = sb3_same_model(job, monitors)
    with RunClock() as clock:
        model.learn(total_timesteps=job.steps)
    eval_env = make_vec_env(
        lambda: sb3_env(config, factory, False), n_envs=1, seed=EVAL_SEED_OFFSET + job.seed
    )
    # either one's model argument: sb3_model made a MaskablePPO exactly where it is masked
    evaluate_policy: Callable[..., tuple[float, float] | EpisodeRewards]
    if is_masked(config, rlfw_space):
        from sb3_contrib.common.maskable.evaluation import evaluate_policy
    else:
        from stable_baselines3.common.evaluation import evaluate_policy
    returns, _ = cast(
        EpisodeRewards,
        evaluate_policy(
            model,
            eval_env,
            n_eval_episodes=EVAL_EPISODES,
            deterministic=True,
            return_episode_rewards=True,
        ),
    )
    envs.close()
    eval_env.close()
    return {
        "wall_s": clock.wall_s,
        "wait_share": clock.wait_share,
        "env_steps": int(model.num_timesteps),
        "returns": [float(r) for r in returns],
        "curve": _monitor_curve(monitors),
        "settings": "rlfw's preset and network (rlfw.bench.same_settings)",
        SETTINGS_FIELD: job_settings(job),
    }


RUNNERS = {"rlfw": run_rlfw, "sb3": run_sb3, "sb3-same": run_sb3_same}


def main(argv: list[str]) -> int:
    job, run_dir = Job.from_json(argv[0]), argv[1]
    torch.set_num_threads(1)  # both frameworks alike: one thread per run
    runner = RUNNERS[
        "sb3-same" if job.framework == "sb3" and job.peer_settings == "same" else job.framework
    ]
    out = runner(job, run_dir)
    if out["env_steps"] < job.steps:
        # Stopped early and still returned: rl-baselines3-zoo's learn() swallows Ctrl-C
        # (and the SIGTERM that stops a suite) to save the model, so the zoo's peer comes
        # back from a stopped run as from a finished one. A partial run is no result.
        raise SystemExit(
            f"rlfw benchmark: {job.framework} {job.algo} {job.env} seed {job.seed} stopped "
            f"at {out['env_steps']} of {job.steps} env steps; no result written"
        )
    returns = np.asarray(out["returns"], np.float64)
    result = {
        **job.__dict__,
        "status": "done",
        "final_return": float(returns.mean()),
        "steps_per_s": out["env_steps"] / out["wall_s"],
        **out,
    }
    tmp = os.path.join(run_dir, RESULT_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, os.path.join(run_dir, RESULT_FILE))  # present only when complete
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
