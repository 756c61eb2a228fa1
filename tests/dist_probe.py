"""Run under torchrun by tests/test_distributed.py: train a few iterations of a real run
built by ``build_runner`` and save, per rank, what the test compares across ranks.

    torchrun --nproc-per-node 2 tests/dist_probe.py OUT_DIR ALGO ITERATIONS

ALGO: ppo or dqn on CartPole, or ppo-pendulum (observation and reward normalization on).
"""

import json
import os
import sys

import torch

from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig, apply_overrides, preset
from rlfw.utils.distributed import init_from_environment


def main(out_dir: str, algo: str, iterations: int) -> None:
    env = "Pendulum-v1" if algo == "ppo-pendulum" else "CartPole-v1"
    algo = algo.split("-")[0]
    config = apply_overrides(RunConfig(algo=algo, env=env), preset(algo, env))
    if env == "Pendulum-v1":  # statistics to compare across ranks (the preset has none)
        config.normalize_obs, config.ppo.normalize_reward = True, True
    config.batch_B, config.batch_T = 2, 16
    if algo == "ppo":
        config.ppo.epochs, config.ppo.minibatch_size = 2, 16
    else:
        config.dqn.learning_starts, config.dqn.batch_size = 0, 16
    n_steps = iterations * 2 * config.batch_B * config.batch_T
    apply_overrides(config, {"schedule": {"n_steps": n_steps, "eval_every": None}})
    ranks = init_from_environment(config.device)
    record = {"local": [], "applied": [], "params": [], "first_obs": None}

    average = ranks.average_gradient

    def recording_average(grad: torch.Tensor) -> None:
        record["local"].append(grad.clone())
        average(grad)
        record["applied"].append(grad.clone())

    ranks.average_gradient = recording_average  # the runner hands it to the algorithm
    runner = build_runner(config, None, progress=False, stdout=False, ranks=ranks)
    optimize = runner.algo.optimize

    def recording_optimize(samples, itr):
        if record["first_obs"] is None:
            record["first_obs"] = samples.observation.clone()
        stats = optimize(samples, itr)
        record["params"].append(runner.algo.flat.flat.detach().clone())
        return stats

    runner.algo.optimize = recording_optimize
    with runner:
        result = runner.train()
    record.update(
        rank=ranks.rank,
        world_size=ranks.world_size,
        seed=runner.sampler.seed,
        iterations=result.iterations,
        env_steps=result.env_steps,
        agent=runner.agent.state_dict(),
    )
    torch.save(record, f"{out_dir}/rank{ranks.rank}.pt")
    ranks.close(finished=True)
    with open(f"{out_dir}/rank{ranks.rank}.threads.json", "w") as out:
        json.dump(thread_names(), out)


def thread_names() -> list[str]:
    """The names of this process's OS threads (gloo's are ``gloo_tcp_loop`` and
    ``pt_gloo_runloop``)."""
    tasks = "/proc/self/task"
    return sorted(open(f"{tasks}/{t}/comm").read().strip() for t in os.listdir(tasks))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
