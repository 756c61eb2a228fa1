"""DQN's tuned settings as a table (``rlfw.algos.preset_table``), each entry with its
source, and C51's, Rainbow's and R2D1's, derived from it; PQN's, a table of its own. Why
each entry is what it is: ``docs/presets.md``."""

from __future__ import annotations

from typing import Any

from rlfw.algos.preset_table import PresetEntry, resolve

DQN_PRESETS: tuple[PresetEntry, ...] = (
    PresetEntry(
        ("classic", "continuous", "mujoco"),
        "rl-baselines3-zoo dqn.yml CartPole-v1 + 3-step double-Q, LR annealing, AL",
        {
            "batch_B": 1,
            "batch_T": 256,
            "hidden": (256, 256),
            "dqn": dict(
                learning_rate=2.3e-3,
                anneal_lr=True,
                batch_size=64,
                replay_capacity=100_000,
                learning_starts=1000,
                gamma=0.99,
                target_update_interval=10,
                replay_ratio=0.5,
                exploration_fraction=0.16,
                epsilon_final=0.04,
                max_grad_norm=10.0,
                double_dqn=True,
                n_step=3,
                advantage_learning=0.9,
            ),
        },
    ),
    PresetEntry(
        ("classic",),
        "γ 0.98 (zoo: 0.99): every final policy holds 500",
        {"dqn": {"gamma": 0.98}},
        env="CartPole",
    ),
    PresetEntry(
        ("minatar",),
        "MinAtar's reference DQN (Young & Tian 2019, examples/dqn.py)",
        {
            "batch_B": 1,
            "batch_T": 32,
            "dqn": dict(
                learning_rate=2.5e-4,
                optimizer="rmsprop",
                optimizer_eps=1e-5,
                batch_size=32,
                replay_capacity=100_000,
                learning_starts=5_000,
                replay_ratio=1.0,
                target_update_interval=1_000,
                gamma=0.99,
                epsilon_start=1.0,
                epsilon_final=0.1,
                exploration_fraction=0.1,
                max_grad_norm=None,
                huber_delta=1.0,
            ),
        },
    ),
    PresetEntry(
        ("atari",),
        "rl-baselines3-zoo dqn.yml Atari, evaluated ε-greedy at 0.05",
        {
            "batch_B": 8,
            "batch_T": 4,
            "schedule": {"eval_greedy": True},
            "dqn": dict(
                learning_rate=1e-4,
                batch_size=32,
                replay_capacity=100_000,
                learning_starts=100_000,
                target_update_interval=1000,
                replay_ratio=0.25,
                exploration_fraction=0.1,
                epsilon_final=0.01,
                optimizer_eps=1.5e-4,
                eval_epsilon=0.05,
            ),
        },
    ),
)


def dqn_preset(env_id: str, family: str) -> dict[str, Any]:
    return resolve(DQN_PRESETS, env_id, family)


def c51_preset(env_id: str, family: str) -> dict[str, Any]:
    """C51 (Bellemare et al. 2017): DQN's preset for the family with a 51-atom head. The
    support: the paper's [-10, 10] for Atari (clipped rewards) and MinAtar (rewards of 1
    per event); CartPole's discounted return (γ 0.99, +1 a step) lies in [0, 100]."""
    out = _with_own_group(dqn_preset(env_id, family), "c51")
    own = out["c51"]
    own.pop("advantage_learning", None)  # an action-value device; C51 learns distributions
    own.pop("gamma", None)  # the default 0.99, which the supports below are sized for
    own["atoms"] = 51
    if family not in ("atari", "minatar"):
        own.update(v_min=0.0, v_max=100.0)
    return out


def rainbow_preset(env_id: str, family: str) -> dict[str, Any]:
    """Rainbow minus noisy nets, as the seed paper's ``eps_rainbow`` configuration runs it
    (Stooke & Abbeel 2018; Hessel et al. 2018): C51 with 3-step returns, double-Q, dueling,
    prioritized replay (α 0.5, β 0.4 -> 1), Adam with eps 0.005 / batch size; on Atari lr
    6.25e-5 and a target copy every 8,000 env steps, elsewhere the learning rate and target
    period of the family's DQN preset; ε-greedy exploration in place of noisy nets."""
    out = _with_own_group(c51_preset(env_id, family), "rainbow", source="c51")
    own = out["rainbow"]
    own.update(
        n_step=3,
        double_dqn=True,
        dueling=True,
        prioritized=True,
        priority_alpha=0.5,
        priority_beta=0.4,
        optimizer="adam",
    )
    if family == "atari":
        own.update(learning_rate=6.25e-5, target_update_interval=8_000)
    own["optimizer_eps"] = 0.005 / own.get("batch_size", 32)
    return out


def _with_own_group(preset: dict[str, Any], name: str, source: str = "dqn") -> dict[str, Any]:
    """``preset`` with its algorithm group (``source``) renamed ``name``."""
    out = {k: v for k, v in preset.items() if k != source}
    out[name] = dict(preset.get(source, {}))
    return out


def r2d1_preset(env_id: str, family: str) -> dict[str, Any]:
    """R2D1. Atari and MinAtar: R2D2's sequences scaled to one learner (burn-in 40, 80
    learned steps, a new sequence every 40, 5-step targets, η 0.9, prioritized α 0.9,
    Adam lr 1e-4 eps 1e-3, target every 2,500 updates' worth of steps), rlpyt's R2D1
    layout; classic control (CartPoleNoVel): short sequences and a small core."""
    if family in ("atari", "minatar"):
        base = dqn_preset(env_id, family)
        return {
            "batch_B": base["batch_B"] if family == "atari" else 8,
            "batch_T": 40,
            "rnn_size": 512 if family == "atari" else 128,
            "r2d1": dict(
                learning_rate=1e-4,
                optimizer="adam",
                optimizer_eps=1e-3,
                burn_in=40,
                learn_steps=80,
                period=40,
                n_step=5,
                prioritized=True,
                priority_alpha=0.9,
                priority_beta=0.6,
                batch_size=32,
                replay_ratio=1 / 40,
                replay_capacity=200_000 if family == "atari" else 100_000,
                learning_starts=20_000,
                target_update_interval=10_000,
                epsilon_final=0.01,
                exploration_fraction=0.1,
                max_grad_norm=40.0,
            ),
        }
    return {
        "batch_B": 8,
        "batch_T": 40,
        "hidden": (64,),
        "rnn_size": 64,
        "r2d1": dict(
            learning_rate=1e-3,
            optimizer="adam",
            burn_in=10,
            learn_steps=20,
            period=10,
            n_step=3,
            batch_size=32,
            replay_ratio=1 / 16,
            replay_capacity=100_000,
            learning_starts=5_000,
            target_update_interval=2_000,
            gamma=0.99,
            epsilon_final=0.02,
            exploration_fraction=0.2,
            max_grad_norm=10.0,
            prioritized=False,
        ),
    }


# PQN's: CleanRL's pqn.py and pqn_atari_envpool.py (vwxyzjn/cleanrl, commit fe8d8a0) and
# purejaxql's pqn_minatar.yaml (mttga/purejaxql, commit 47af6d7). minibatch_size is their
# batch over num_minibatches; schedules given as fractions of the run stay fractions.
PQN_PRESETS: tuple[PresetEntry, ...] = (
    PresetEntry(
        ("classic",),
        "CleanRL pqn.py defaults (its benchmark runs CartPole, Acrobot, MountainCar on them)",
        {
            "batch_B": 4,
            "batch_T": 128,
            "hidden": (120, 84),
            "schedule": {"n_steps": 500_000},
            "pqn": dict(
                learning_rate=2.5e-4,
                anneal_lr=True,
                optimizer="radam",
                gamma=0.99,
                lam=0.65,
                epochs=4,
                minibatch_size=128,
                max_grad_norm=10.0,
                epsilon_start=1.0,
                epsilon_final=0.05,
                exploration_fraction=0.5,
            ),
        },
    ),
    PresetEntry(
        ("minatar",),
        "purejaxql pqn_minatar.yaml (128 envs x 32 steps, 2 epochs x 32 minibatches)",
        {
            "batch_B": 128,
            "batch_T": 32,
            "pqn": dict(
                learning_rate=5e-4,
                anneal_lr=True,
                optimizer="radam",
                gamma=0.99,
                lam=0.65,
                epochs=2,
                minibatch_size=128,
                max_grad_norm=10.0,
                epsilon_start=1.0,
                epsilon_final=0.05,
                exploration_fraction=0.1,
            ),
        },
    ),
    PresetEntry(
        ("atari",),
        "CleanRL pqn_atari_envpool.py, evaluated ε-greedy at 0.05 as dqn's Atari preset",
        {
            "batch_B": 8,
            "batch_T": 128,
            "schedule": {"eval_greedy": True},
            "pqn": dict(
                learning_rate=2.5e-4,
                anneal_lr=True,
                optimizer="radam",
                gamma=0.99,
                lam=0.65,
                epochs=4,
                minibatch_size=256,
                max_grad_norm=10.0,
                epsilon_start=1.0,
                epsilon_final=0.01,
                exploration_fraction=0.1,
                eval_epsilon=0.05,
            ),
        },
    ),
)


def pqn_preset(env_id: str, family: str) -> dict[str, Any]:
    return resolve(PQN_PRESETS, env_id, family)
