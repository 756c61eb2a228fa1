"""SB3's PPO collecting, rlfw's PPO learning: which side of a MinAtar gap is the learner's?

rlfw and SB3, given the same settings and network (``rlfw.bench.same_settings``), take the
same update from the same batch (``tests/test_benchmark.py::
test_rlfw_s_ppo_update_is_the_sb3_peer_s_on_the_same_batch``). This runs a whole run with
SB3 collecting every batch (its envs, seeds, action sampling, GAE and minibatch draws) and
rlfw's ``PPO`` taking every update (its loss, compiled as in rlfw's runs, and its Adam),
the updated weights copied back into SB3's policy before the next batch; then evaluates
the final policy as the suite does (20 greedy episodes, seeds the training envs never
used), and gives the training curve (mean return per 100k env steps, as rlfw logs it).
A run's result lands on rlfw's side or SB3's: the learner's or the collector's.
``--lockstep N`` instead follows the two learners on the same N batches (SB3's own run),
printing how far apart their weights are after each.

Prints one JSON line. One core, one torch thread; nothing is written.

    python experiments/bench/sb3_collects_rlfw_learns.py --game Asterix --seed 0
    python experiments/bench/sb3_collects_rlfw_learns.py --game Asterix --lockstep 100
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from rlfw.algos import optim
from rlfw.algos.compile import compile_loss
from rlfw.bench.run import EVAL_EPISODES, EVAL_SEED_OFFSET
from rlfw.bench.same_settings import paired_ppo, rlfw_order, rollout_columns
from rlfw.bench.suites import MINATAR_BUDGET
from rlfw.launch.config import RunConfig

CURVE_WINDOW = 100_000  # env steps per training-curve point: rlfw's log_every in the suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="Asterix")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=MINATAR_BUDGET["ppo"])
    parser.add_argument("--eager", action="store_true", help="the loss uncompiled, as SB3 runs it")
    parser.add_argument(
        "--torch-adam",
        action="store_true",
        help="torch's own Adam step (not fused, subnormals kept), as SB3's",
    )
    parser.add_argument(
        "--lockstep",
        type=int,
        metavar="N",
        help="instead: N batches that SB3 collects and learns from itself, "
        "rlfw's learner learning from each too; prints how far apart the "
        "two learners' weights are after each",
    )
    args = parser.parse_args()
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    torch.set_num_threads(1)
    config = RunConfig.for_env(f"MinAtar/{args.game}-v1", "ppo")
    factory = config.env_factory()
    T, B = config.batch_T, config.batch_B
    n_itr = -(-args.steps // (T * B))
    pair = paired_ppo(config, args.seed, n_itr)
    envs, model, agent, ppo, pairs = pair.envs, pair.model, pair.agent, pair.ppo, pair.layers
    own = ppo.config
    # the loss as PPO.optimize chooses it: compiled where the run's steps repay it
    ppo._loss = (
        ppo._losses
        if args.eager
        else compile_loss(
            ppo._losses,
            own.compile,
            agent.model,
            n_itr * own.epochs * -(-T * B // own.minibatch_size),
        )
    )
    if args.torch_adam:  # rlfw's step flushes subnormals and calls the fused kernel
        ppo.optimizer = torch.optim.Adam(
            [ppo.flat.flat], lr=own.learning_rate, eps=own.optimizer_eps, foreach=False
        )
        optim.step_optimizer = lambda optimizer: optimizer.step()

    def rlfw_learns(copy_back: bool = True) -> None:
        """SB3's ``train``, done by rlfw's PPO on SB3's rollout, in SB3's minibatch
        order; the weights then
        copied into SB3's policy, which collects the next batch."""
        columns = rollout_columns(model.rollout_buffer)
        agent.train_mode()
        for _ in range(own.epochs):
            order = rlfw_order(np.random.permutation(T * B), T, B)
            for start in range(0, T * B, own.minibatch_size):
                rows = order[start : start + own.minibatch_size]
                ppo._minibatch_step(*(x[rows] for x in columns), torch.tensor(own.clip))
        if not copy_back:
            return
        with torch.no_grad():
            for ours, theirs in pairs:
                for mine, copy in zip(ours.parameters(), theirs.parameters()):
                    copy.copy_(mine)

    if args.lockstep:
        sb3_learns = model.train
        batches = []

        def both_learn() -> None:
            """SB3 learns from its batch; rlfw's learner from the same one, the same draws."""
            draws = np.random.get_state()
            rlfw_learns(copy_back=False)
            np.random.set_state(draws)
            sb3_learns()
            gap = max(
                (mine - theirs).abs().max().item()
                for ours, other in pairs
                for mine, theirs in zip(ours.parameters(), other.parameters())
            )
            batches.append(gap)
            print(f"batch {len(batches)}: largest weight difference {gap:.2e}", flush=True)

        model.train = both_learn
        model.learn(total_timesteps=args.lockstep * T * B)
        return
    model.train = rlfw_learns
    start = time.perf_counter()
    model.learn(total_timesteps=args.steps)
    wall_s = time.perf_counter() - start
    eval_env = make_vec_env(lambda: factory(False), n_envs=1, seed=EVAL_SEED_OFFSET + args.seed)
    returns, _ = evaluate_policy(
        model,
        eval_env,
        n_eval_episodes=EVAL_EPISODES,
        deterministic=True,
        return_episode_rewards=True,
    )
    print(
        json.dumps(
            {
                "game": args.game,
                "seed": args.seed,
                "steps": args.steps,
                "eager": args.eager,
                "torch_adam": args.torch_adam,
                "final_return": float(np.mean(returns)),
                "wall_s": round(wall_s),
                "curve": training_curve(envs),
            }
        )
    )


def training_curve(envs, window: int = CURVE_WINDOW) -> list[tuple[int, float]]:
    """(env steps, mean return of the training episodes that ended in the ``window`` steps
    before), as rlfw's runs log ``rollout/return_mean``: an episode that ends after the
    k-th step of its env ends near env step k * n_envs of the run."""
    ends, returns = [], []
    for lengths, rets in zip(
        envs.env_method("get_episode_lengths"), envs.env_method("get_episode_rewards")
    ):
        ends += list(np.cumsum(lengths) * envs.num_envs)
        returns += rets
    ends, returns = np.array(ends), np.array(returns)
    last = int(ends.max()) if len(ends) else 0
    return [
        (top, round(float(returns[(ends > top - window) & (ends <= top)].mean()), 3))
        for top in range(window, last + 1, window)
        if ((ends > top - window) & (ends <= top)).any()
    ]


if __name__ == "__main__":
    main()
