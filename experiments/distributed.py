"""PPO with one learner replica per rank, read top to bottom. Launch with torchrun:

    torchrun --nproc-per-node 2 experiments/distributed.py                 # CPU, gloo
    torchrun --nproc-per-node 8 experiments/distributed.py --env ALE/Pong-v5 --device cuda

Without torchrun it is an ordinary one-process run. Each rank samples its own envs (its
own seeds), gradients are averaged with one all-reduce per step, rank 0 logs, evaluates
and checkpoints. The global batch is ranks x batch_B x batch_T.
"""

import argparse

from rlfw.launch.build import build_runner
from rlfw.launch.config import RunConfig
from rlfw.utils.distributed import init_from_environment


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, help="env steps over all ranks (preset)")
    parser.add_argument("--log-dir", default="runs/distributed-ppo")
    args = parser.parse_args()

    config = RunConfig.for_env(args.env, algo="ppo", steps=args.steps, device=args.device)
    ranks = init_from_environment(config.device)  # None when not launched by torchrun
    if ranks is not None:  # keep the preset's global batch: split envs and minibatch
        config.batch_B //= ranks.world_size
        config.ppo.minibatch_size //= ranks.world_size
    try:
        with build_runner(config, args.log_dir, ranks=ranks) as runner:
            result = runner.train()
        if ranks is None or ranks.is_chief:
            print(f"{result.evals()}; run folder {args.log_dir}")
    finally:
        if ranks is not None:
            ranks.close()


if __name__ == "__main__":
    main()
