"""One fixed policy, collected by rlfw's serial sampler and by SB3's rollout loop: do the
two collectors give the same data?

The policy is a run's newest checkpoint (``rlfw eval``'s loading: no pickles trusted),
copied into an SB3 PPO policy with the same network (``rlfw.bench.same_settings``). Each
side then plays ``--batches`` batches of the run's ``[T, B]`` size with stochastic actions:
rlfw's sampler (its env seeding, per-slot uniforms, inverse-CDF draws) and SB3's loop
(``make_vec_env``'s seeding, ``policy(obs)`` as ``collect_rollouts`` calls it). A
difference in the mean episode return, episode length or action frequencies beyond their
standard errors points at the collector; none leaves the learner or chance.

Prints one JSON line per side. One torch thread; nothing is written.

    python experiments/bench/same_policy_collectors.py RUN_DIR --seed 0 --batches 100
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from rlfw.bench.same_settings import sb3_model, shared_layers
from rlfw.envs.spaces import EnvSpaces
from rlfw.launch.build import build_agent
from rlfw.launch.config import RunConfig
from rlfw.launch.evaluate import load_for_evaluation
from rlfw.samplers.serial import SerialSampler


def summary(
    side: str, returns: list[float], lengths: list[int], actions: np.ndarray, n_actions: int
) -> dict:
    returns_a = np.asarray(returns, float)
    return {
        "collector": side,
        "episodes": len(returns_a),
        "mean_return": round(float(returns_a.mean()), 3),
        "standard_error": round(float(returns_a.std() / np.sqrt(len(returns_a))), 3),
        "mean_length": round(float(np.mean(lengths)), 1),
        "action_frequencies": (np.bincount(actions, minlength=n_actions) / len(actions))
        .round(4)
        .tolist(),
    }


def rlfw_collects(config: RunConfig, agent, seed: int, batches: int) -> tuple:
    sampler = SerialSampler(
        config.env_factory(), batch_T=config.batch_T, batch_B=config.batch_B, seed=seed
    )
    sampler.initialize(agent)
    returns, lengths, actions = [], [], []
    try:
        for itr in range(batches):
            samples, episodes = sampler.obtain_samples(itr)
            returns += [e.ret for e in episodes]
            lengths += [e.length for e in episodes]
            actions.append(samples.action.numpy().ravel().astype(int))
    finally:
        sampler.close()
    return returns, lengths, np.concatenate(actions)


def sb3_collects(config: RunConfig, agent, seed: int, batches: int) -> tuple:
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.utils import obs_as_tensor

    factory = config.env_factory()
    envs = make_vec_env(lambda: factory(True), n_envs=config.batch_B, seed=seed)
    model = sb3_model(config, envs, seed)
    with torch.no_grad():
        for ours, theirs in shared_layers(agent.model, model.policy):
            theirs.load_state_dict(ours.state_dict())
    model.policy.set_training_mode(False)
    observation = envs.reset()
    returns, lengths, actions = [], [], []
    for _ in range(batches * config.batch_T):
        with torch.no_grad():
            action, _, _ = model.policy(obs_as_tensor(observation, "cpu"))
        action = action.numpy()
        actions.append(action.astype(int))
        observation, _, _, infos = envs.step(action)
        for info in infos:
            if "episode" in info:
                returns.append(info["episode"]["r"])
                lengths.append(info["episode"]["l"])
    envs.close()
    return returns, lengths, np.concatenate(actions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", help="an rlfw PPO run folder on a Discrete-action env")
    parser.add_argument("--seed", type=int, default=0, help="both collectors' env seed")
    parser.add_argument("--batches", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = RunConfig.load(args.run_dir)
    spaces = EnvSpaces.of(config.env_factory())
    agent = build_agent(config, spaces)
    agent.load_state_dict(load_for_evaluation(args.run_dir)[1]["agent"])
    for side, collect in (("rlfw", rlfw_collects), ("sb3", sb3_collects)):
        print(
            json.dumps(
                summary(side, *collect(config, agent, args.seed, args.batches), spaces.action.n)
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
