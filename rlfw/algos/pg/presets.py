"""PPO's and A2C's tuned settings, as tables (``rlfw.algos.preset_table``): one entry per env
family, then per env where a tuned entry exists, each with its source. Why each entry is
what it is: ``docs/presets.md``."""

from __future__ import annotations

from typing import Any

from rlfw.algos.preset_table import PresetEntry, resolve

CLASSIC, CONTINUOUS, MUJOCO = ("classic",), ("continuous",), ("mujoco",)
MINIGRID = ("minigrid",)
MINATAR, ATARI = ("minatar",), ("atari",)
MULTIAGENT = ("multiagent",)

# SB3's PPO defaults, which rl-baselines3-zoo's entries start from
_SB3_PPO = dict(
    learning_rate=3e-4,
    anneal_lr=False,
    gamma=0.99,
    gae_lambda=0.95,
    epochs=10,
    minibatch_size=64,
    clip=0.2,
    value_clip=None,
    entropy_coef=0.0,
    value_coef=0.5,
    max_grad_norm=0.5,
    normalize_reward=True,
)
# SB3's PPO as constructed with no arguments (no reward normalization: that is the zoo's)
_SB3_DEFAULTS = {**_SB3_PPO, "normalize_reward": False, "anneal_clip": False}
_ZOO_NET = {"hidden": (256, 256), "activation": "relu", "log_std_init": -2.0, "ortho_init": False}
_SB3_NET = {"hidden": (64, 64), "activation": "tanh", "log_std_init": 0.0, "ortho_init": True}
_SB3_DEFAULTS_8X256 = {
    **_SB3_NET,
    "batch_B": 8,
    "batch_T": 256,
    "schedule": {"n_steps": 200_000},
    "ppo": dict(_SB3_DEFAULTS),
}
_NORMALIZED = {"normalize_obs": True, "hidden": (64, 64)}
# rl-baselines3-zoo ppo.yml LunarLander-v3 and LunarLanderContinuous-v3 (the same block):
# SB3's defaults but for these
_ZOO_LUNAR = {
    **_SB3_NET,
    "batch_B": 16,
    "batch_T": 1024,
    "normalize_obs": False,
    "schedule": {"n_steps": 1_000_000},
    "ppo": {
        **_SB3_DEFAULTS,
        "minibatch_size": 64,
        "gae_lambda": 0.98,
        "gamma": 0.999,
        "epochs": 4,
        "entropy_coef": 0.01,
    },
}
_NO_VELOCITY = PresetEntry(
    CLASSIC,
    "rl-baselines3-zoo ppo_lstm CartPoleNoVel-v1: normalized, one 64-unit layer; "
    "250k steps: measured",
    {"normalize_obs": True, "hidden": (64,), "schedule": {"n_steps": 250_000}},
    env="CartPoleNoVel",
)

PPO_PRESETS: tuple[PresetEntry, ...] = (
    PresetEntry(
        MINIGRID,
        "rl-baselines3-zoo ppo.yml MiniGrid-DoorKey-5x5-v0 (minigrid-defaults)",
        {
            **_SB3_NET,
            "batch_B": 8,
            "batch_T": 128,
            "ppo": {**_SB3_PPO, "learning_rate": 2.5e-4},
        },
    ),
    PresetEntry(
        CLASSIC,
        "rl-baselines3-zoo ppo.yml CartPole-v1",
        {
            "batch_B": 8,
            "batch_T": 32,
            "ppo": dict(
                learning_rate=1e-3,
                anneal_lr=True,
                gamma=0.98,
                gae_lambda=0.8,
                epochs=20,
                minibatch_size=256,
                clip=0.2,
                anneal_clip=True,
                entropy_coef=0.0,
            ),
        },
    ),
    PresetEntry(
        CLASSIC,
        "rl-baselines3-zoo ppo.yml Acrobot-v1",
        {
            "normalize_obs": True,
            "batch_B": 16,
            "batch_T": 256,
            "ppo": {
                **_SB3_PPO,
                "gamma": 0.99,
                "gae_lambda": 0.94,
                "epochs": 4,
                "anneal_clip": False,
            },
        },
        env="Acrobot",
    ),
    _NO_VELOCITY,
    PresetEntry(
        CLASSIC,
        "rlfw tune (docs/benchmarks/tuned/studies/ppo-MountainCar-v0), best trial rounded",
        {
            "normalize_obs": True,
            "batch_T": 256,
            "hidden": (64, 64),
            "activation": "tanh",
            "schedule": {"n_steps": 200_000},
            "ppo": dict(
                minibatch_size=128,
                gamma=0.99,
                gae_lambda=0.9999,
                learning_rate=1.45e-3,
                entropy_coef=0.0035,
                max_grad_norm=1.8,
                clip=0.4,
                epochs=20,
            ),
        },
        env="MountainCar",
    ),
    PresetEntry(CLASSIC, "rl-baselines3-zoo ppo.yml LunarLander-v3", _ZOO_LUNAR, env="LunarLander"),
    PresetEntry(
        CLASSIC,
        "SB3's PPO defaults (2,048 steps a batch, as 8 x 256), entropy 0.01: measured here",
        {**_SB3_DEFAULTS_8X256, "ppo": {**_SB3_DEFAULTS, "entropy_coef": 0.01}},
        env="Taxi",
    ),
    PresetEntry(
        CLASSIC,
        "SB3's PPO defaults (2,048 steps a batch, as 8 x 256): measured here",
        _SB3_DEFAULTS_8X256,
        env="Blackjack",
    ),
    PresetEntry(
        CLASSIC,
        "PettingZoo's MaskablePPO connect four tutorial: SB3's defaults, 20,480 steps",
        {
            **_SB3_NET,
            "batch_B": 1,
            "batch_T": 2048,
            "schedule": {"n_steps": 20_480},
            "ppo": dict(_SB3_DEFAULTS),
        },
        env="ConnectFour",
    ),
    PresetEntry(
        CONTINUOUS,
        "rl-baselines3-zoo ppo.yml Pendulum-v1, normalized, no gSDE",
        {
            **_NORMALIZED,
            "batch_B": 4,
            "batch_T": 1024,
            "ppo": dict(
                learning_rate=1e-3,
                gamma=0.9,
                gae_lambda=0.95,
                epochs=10,
                minibatch_size=64,
                clip=0.2,
                entropy_coef=0.0,
                max_grad_norm=0.5,
                normalize_reward=True,
                optimizer_eps=1e-8,
            ),
        },
    ),
    PresetEntry(
        CONTINUOUS,
        "rl-baselines3-zoo ppo.yml LunarLanderContinuous-v3",
        _ZOO_LUNAR,
        env="LunarLanderContinuous",
    ),
    PresetEntry(
        CONTINUOUS,
        "rl-baselines3-zoo ppo.yml Pendulum-v1 as written (gSDE)",
        {
            "normalize_obs": False,
            "sde_sample_freq": 4,
            "ppo": dict(normalize_reward=False, optimizer_eps=1e-5),
        },
        env="Pendulum",
    ),
    PresetEntry(
        CONTINUOUS,
        "rl-baselines3-zoo ppo.yml MountainCarContinuous-v0 (gSDE)",
        {
            "batch_B": 1,
            "batch_T": 8,
            "log_std_init": -3.29,
            "ortho_init": False,
            "sde_sample_freq": 8,
            "schedule": {"n_steps": 20_000},
            "ppo": dict(
                learning_rate=7.77e-5,
                gamma=0.9999,
                gae_lambda=0.9,
                epochs=10,
                minibatch_size=256,
                clip=0.1,
                entropy_coef=0.00429,
                value_coef=0.19,
                max_grad_norm=5.0,
                normalize_reward=True,
                optimizer_eps=1e-5,
            ),
        },
        env="MountainCarContinuous",
    ),
    PresetEntry(
        MUJOCO,
        "CleanRL ppo_continuous_action (value 0.25: its 0.5 on half the error)",
        {
            **_NORMALIZED,
            "batch_B": 1,
            "batch_T": 2048,
            "ppo": dict(
                learning_rate=3e-4,
                anneal_lr=True,
                gamma=0.99,
                gae_lambda=0.95,
                epochs=10,
                minibatch_size=64,
                clip=0.2,
                value_clip=0.2,
                entropy_coef=0.0,
                value_coef=0.25,
                max_grad_norm=0.5,
                normalize_reward=True,
            ),
        },
    ),
    PresetEntry(
        MUJOCO,
        "rl-baselines3-zoo ppo.yml HalfCheetah-v4",
        {
            **_ZOO_NET,
            "batch_B": 1,
            "batch_T": 512,
            "ppo": {
                **_SB3_PPO,
                "learning_rate": 2.0633e-05,
                "gamma": 0.98,
                "gae_lambda": 0.92,
                "epochs": 20,
                "clip": 0.1,
                "entropy_coef": 0.000401762,
                "value_coef": 0.58096,
                "max_grad_norm": 0.8,
            },
        },
        env="HalfCheetah",
    ),
    PresetEntry(
        MUJOCO,
        "rl-baselines3-zoo ppo.yml Hopper-v4",
        {
            **_ZOO_NET,
            "batch_B": 1,
            "batch_T": 512,
            "ppo": {
                **_SB3_PPO,
                "learning_rate": 9.80828e-05,
                "gamma": 0.999,
                "gae_lambda": 0.99,
                "epochs": 5,
                "minibatch_size": 32,
                "clip": 0.2,
                "entropy_coef": 0.00229519,
                "value_coef": 0.835671,
                "max_grad_norm": 0.7,
            },
        },
        env="Hopper",
    ),
    PresetEntry(
        MUJOCO,
        "rl-baselines3-zoo ppo.yml Walker2d-v4",
        {
            **_SB3_NET,
            "batch_B": 1,
            "batch_T": 512,
            "ppo": {
                **_SB3_PPO,
                "learning_rate": 5.05041e-05,
                "gamma": 0.99,
                "gae_lambda": 0.95,
                "epochs": 20,
                "minibatch_size": 32,
                "clip": 0.1,
                "entropy_coef": 0.000585045,
                "value_coef": 0.871923,
                "max_grad_norm": 1.0,
            },
        },
        env="Walker2d",
    ),
    PresetEntry(
        MUJOCO,
        "rl-baselines3-zoo ppo.yml Ant-v4",
        {**_SB3_NET, "batch_B": 1, "batch_T": 2048, "ppo": dict(_SB3_PPO)},
        env="Ant",
    ),
    PresetEntry(
        MUJOCO,
        "rl-baselines3-zoo ppo.yml Swimmer-v4",
        {
            **_SB3_NET,
            "batch_B": 4,
            "batch_T": 1024,
            "ppo": {
                **_SB3_PPO,
                "learning_rate": 6e-4,
                "gamma": 0.9999,
                "gae_lambda": 0.98,
                "minibatch_size": 256,
            },
        },
        env="Swimmer",
    ),
    PresetEntry(
        MINATAR,
        "gymnax-blines' MinAtar PPO (64x128, 4 epochs of 8), lr 2e-3, gamma 0.99: a recorded "
        "search",
        {
            "batch_B": 64,
            "batch_T": 128,
            "ppo": dict(
                learning_rate=2e-3,
                anneal_lr=False,
                optimizer_eps=1e-5,
                gamma=0.99,
                gae_lambda=0.95,
                epochs=4,
                minibatch_size=1024,
                clip=0.2,
                anneal_clip=False,
                value_clip=None,
                entropy_coef=0.01,
                value_coef=0.5,
                max_grad_norm=0.5,
                normalize_advantage=True,
            ),
        },
    ),
    PresetEntry(
        MULTIAGENT,
        "MAPPO paper (Yu et al. 2022) MPE settings, on 8 envs x 100 steps",
        {
            "hidden": (64, 64),
            "activation": "relu",
            "batch_T": 100,
            "ppo": dict(
                learning_rate=7e-4,
                anneal_lr=False,
                gamma=0.99,
                gae_lambda=0.95,
                epochs=10,
                minibatch_size=100_000,  # one minibatch: the whole batch
                clip=0.2,
                value_clip=None,
                entropy_coef=0.01,
                value_coef=1.0,
                max_grad_norm=10.0,
                normalize_advantage=True,
            ),
        },
    ),
    PresetEntry(
        ATARI,
        "PPO paper / CleanRL ppo_atari, 8 epochs of 128 under bf16",
        {
            "batch_B": 8,
            "batch_T": 128,
            "ppo": dict(
                learning_rate=2.5e-4,
                anneal_lr=True,
                optimizer_eps=1e-5,
                epochs=8,
                minibatch_size=128,
                clip=0.1,
                anneal_clip=False,
                value_clip=0.1,
                value_coef=0.5,
                entropy_coef=0.01,
                amp="bf16",
            ),
        },
    ),
)

A2C_PRESETS: tuple[PresetEntry, ...] = (
    PresetEntry(
        CLASSIC,
        "SB3's A2C defaults (rl-baselines3-zoo a2c.yml CartPole-v1)",
        {"batch_B": 8, "batch_T": 5, "a2c": dict(learning_rate=7e-4, entropy_coef=0.0)},
    ),
    _NO_VELOCITY,
    PresetEntry(
        CONTINUOUS,
        "rl-baselines3-zoo a2c.yml Pendulum-v1, without gSDE",
        {
            **_NORMALIZED,
            "batch_B": 8,
            "batch_T": 8,
            "a2c": dict(
                learning_rate=7e-4,
                anneal_lr=True,
                gamma=0.9,
                gae_lambda=0.9,
                value_coef=0.4,
                normalize_reward=True,
            ),
        },
    ),
    PresetEntry(
        CONTINUOUS,
        "rl-baselines3-zoo a2c.yml Pendulum-v1 as written (gSDE, 1M)",
        {
            "sde_sample_freq": 8,
            "log_std_init": -2.0,
            "ortho_init": False,
            "schedule": {"n_steps": 1_000_000},
        },
        env="Pendulum",
    ),
    PresetEntry(
        MUJOCO,
        "the A2C paper's continuous setup, synchronous, 8 envs x 5 steps",
        {
            **_NORMALIZED,
            "batch_B": 8,
            "batch_T": 5,
            "a2c": dict(
                learning_rate=7e-4,
                anneal_lr=True,
                gamma=0.99,
                gae_lambda=1.0,
                normalize_reward=True,
            ),
        },
    ),
    PresetEntry(
        MINATAR + ATARI,
        "the A3C paper's Atari setup, synchronous: 16 envs x 5 steps",
        {
            "batch_B": 16,
            "batch_T": 5,
            "a2c": dict(learning_rate=7e-4, entropy_coef=0.01, value_coef=0.25),
        },
    ),
)


def ppo_preset(env_id: str, family: str) -> dict[str, Any]:
    return resolve(PPO_PRESETS, env_id, family)


def a2c_preset(env_id: str, family: str) -> dict[str, Any]:
    return resolve(A2C_PRESETS, env_id, family)


def _renamed(preset: dict[str, Any], source: str, name: str) -> dict[str, Any]:
    """``preset`` with its algorithm group (``source``) renamed ``name``."""
    out = {k: v for k, v in preset.items() if k != source}
    if source in preset:
        out[name] = dict(preset[source])
    return out


def appo_preset(env_id: str, family: str) -> dict[str, Any]:
    """PPO's preset for the env (its table's entry, with that entry's source), on V-trace
    targets: APPO is Sample Factory's PPO with V-trace, and starting from PPO's tuned
    settings makes the two differ in the correction alone (the lag study's comparison)."""
    return _renamed(ppo_preset(env_id, family), "ppo", "appo")


def ippo_preset(env_id: str, family: str) -> dict[str, Any]:
    """PPO's preset for the env: IPPO is PPO over every agent's column."""
    return _renamed(ppo_preset(env_id, family), "ppo", "ippo")


def mappo_preset(env_id: str, family: str) -> dict[str, Any]:
    """PPO's preset for the env, with each agent's observation beside the env's global
    state (``env_options.global_state``), which MAPPO's critic reads."""
    out = _renamed(ppo_preset(env_id, family), "ppo", "mappo")
    out["env_options"] = {**out.get("env_options", {}), "global_state": True}
    return out


def impala_preset(env_id: str, family: str) -> dict[str, Any]:
    """A2C's preset for the env (its table's entry, with that entry's source), on V-trace
    targets; on MinAtar and Atari the IMPALA paper's Atari settings (Espeholt et al. 2018,
    table G.1: 32 envs x 20-step unrolls, RMSProp lr 6e-4, decay 0.99, entropy 0.01,
    baseline cost 0.5 on half the squared error (value_coef 0.25 here), gradient norm
    clipped at 40), with RMSProp's eps 0.01 divided by the batch's 640 steps: the paper
    sums its loss over the batch where rlfw averages it, and eps is the one setting of
    RMSProp that sees the gradient's scale (0.01 on a mean loss stalled learning: MinAtar
    Breakout 0.4 at 500k steps)."""
    out = _renamed(a2c_preset(env_id, family), "a2c", "impala")
    if env_id.startswith("CartPole-"):
        # Measured (docs/notes/2026-12-07-async-handoffs-and-sample-factory.md): on A2C's
        # 120k steps one seed in three ended at 223 under a policy lag of one update; 300k
        # steps with the rate annealed to 0 end at 500 on every seed and runner.
        out["schedule"] = {"n_steps": 300_000}
        out["impala"] = {**out["impala"], "anneal_lr": True}
    if family in MINATAR + ATARI:
        out.update(batch_B=32, batch_T=20)
        out["impala"] = dict(
            learning_rate=6e-4,
            optimizer="rmsprop",
            optimizer_eps=0.01 / (32 * 20),
            entropy_coef=0.01,
            value_coef=0.25,
            max_grad_norm=40.0,
        )
    return out
