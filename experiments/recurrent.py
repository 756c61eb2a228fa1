"""An LSTM (or GRU) PPO agent on CartPole without its velocities, read top to bottom: the
observations hold positions only, so the policy must remember where things were to know
where they are going. The same run as
``python -m rlfw train --env rlfw/CartPoleNoVel-v1 --set recurrent=lstm``.

    python experiments/recurrent.py                      # LSTM, 250k steps: reaches ~500
    python experiments/recurrent.py --recurrent none     # feed-forward: stays near 40
    python experiments/recurrent.py --recurrent gru --sampler cpu --seed 1
"""

import argparse

from rlfw import RunConfig, build_runner
from rlfw.envs import CARTPOLE_NO_VELOCITY
from rlfw.launch.build import default_log_dir
from rlfw.registry import SAMPLERS


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", default=CARTPOLE_NO_VELOCITY)
    parser.add_argument("--recurrent", choices=("lstm", "gru", "none"), default="lstm")
    parser.add_argument("--steps", type=int, help="env steps (default: the preset's, 250k)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sampler", choices=SAMPLERS.names(), help="default serial")
    parser.add_argument("--log-dir", help="run folder (default: runs/<algo>-<env>-s<seed>-<time>)")
    args = parser.parse_args()

    # The preset (rl-zoo's CartPole PPO settings, normalized observations), with a recurrent
    # core between the MLP features and the heads; every sampler carries its states.
    config = RunConfig.for_env(
        args.env,
        algo="ppo",
        steps=args.steps,
        seed=args.seed,
        recurrent=None if args.recurrent == "none" else args.recurrent,
    )
    if args.sampler:
        config.sampler = args.sampler  # the one line to swap: "serial" -> "cpu", ...
    log_dir = args.log_dir or default_log_dir(config)

    with build_runner(config, log_dir) as runner:
        result = runner.train()
        final = runner.sampler.evaluate(20, greedy=True)  # the policy the user gets
    mean = sum(e.ret for e in final) / len(final)
    print(f"final policy {mean:.1f} over 20 episodes ({result.evals()}); {log_dir}")


if __name__ == "__main__":  # worker processes re-import this file under spawn
    main()
