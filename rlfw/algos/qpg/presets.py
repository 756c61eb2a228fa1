"""SAC's, TD3's and DDPG's tuned settings as tables (``rlfw.algos.preset_table``), each
entry with its source: rl-baselines3-zoo's sac.yml, td3.yml and ddpg.yml (hyperparams/,
v2.x). Why each entry is what it is: ``docs/presets.md``.

SB3 trains after every ``env.step`` of its one env (``train_freq=1``): ``batch_B=1,
batch_T=1`` keeps that order (collect one step, then ``replay_ratio`` updates)."""

from __future__ import annotations

from typing import Any

from rlfw.algos.preset_table import PresetEntry, resolve

ALL = ("classic", "continuous", "mujoco", "robotics", "minigrid", "minatar", "atari")

SAC_PRESETS: tuple[PresetEntry, ...] = (
    PresetEntry(
        ALL,
        "SB3's SAC defaults: one env, a 256x256 ReLU MLP, one update per step",
        {"batch_B": 1, "batch_T": 1, "hidden": (256, 256), "activation": "relu"},
    ),
    PresetEntry(
        ("continuous",),
        "rl-baselines3-zoo sac.yml Pendulum-v1",
        {"schedule": {"n_steps": 20_000}, "sac": {"learning_rate": 1e-3}},
        env="Pendulum",
    ),
    PresetEntry(
        ("continuous",),
        "rl-baselines3-zoo sac.yml MountainCarContinuous-v0: gSDE, 32 steps then 32 updates",
        {
            "hidden": (64, 64),
            "batch_T": 32,
            "sde_sample_freq": 32,
            "log_std_init": -3.67,
            "schedule": {"n_steps": 50_000},
            "sac": dict(
                learning_rate=3e-4,
                replay_capacity=50_000,
                batch_size=512,
                ent_coef=0.1,
                replay_ratio=1.0,
                gamma=0.9999,
                tau=0.01,
                learning_starts=0,
                sde_expln=True,
            ),
        },
        env="MountainCarContinuous",
    ),
    PresetEntry(
        ("continuous",),
        "rl-baselines3-zoo sac.yml LunarLanderContinuous-v3 (its lr schedule made constant)",
        {
            "hidden": (400, 300),
            "schedule": {"n_steps": 500_000},
            "sac": dict(learning_rate=7.3e-4, tau=0.01, learning_starts=10_000),
        },
        env="LunarLanderContinuous",
    ),
    PresetEntry(
        ("mujoco",),
        "rl-baselines3-zoo sac.yml HalfCheetah/Hopper/Walker2d/Ant-v4",
        {"sac": {"learning_starts": 10_000}},
    ),
    PresetEntry(
        ("robotics",),
        "rl-baselines3-zoo sac.yml FetchReach: HER future k=4, normalized (no time feature)",
        {
            "hidden": (64, 64),
            "normalize_obs": True,
            "sac": dict(
                her="future",
                her_k=4,
                gamma=0.95,
                learning_rate=1e-3,
                learning_starts=1000,
                n_critics=1,
            ),
        },
        env="FetchReach",
    ),
)


def _td3_like(algo: str) -> tuple[PresetEntry, ...]:
    """TD3's and DDPG's tables: the zoo gives both the same settings."""
    return (
        PresetEntry(
            ALL,
            "SB3's TD3/DDPG defaults: one env, a 400x300 ReLU MLP, one update per step",
            {"batch_B": 1, "batch_T": 1, "hidden": (400, 300), "activation": "relu"},
        ),
        PresetEntry(
            ("continuous",),
            f"rl-baselines3-zoo {algo}.yml Pendulum-v1",
            {
                "schedule": {"n_steps": 20_000},
                algo: dict(gamma=0.98, replay_capacity=200_000, learning_starts=10_000),
            },
            env="Pendulum",
        ),
        PresetEntry(
            ("mujoco",),
            f"rl-baselines3-zoo {algo}.yml HalfCheetah/Hopper/Walker2d/Ant-v4",
            {algo: dict(learning_starts=10_000, batch_size=256)},
        ),
    )


TD3_PRESETS = _td3_like("td3")
DDPG_PRESETS = _td3_like("ddpg")


def sac_preset(env_id: str, family: str) -> dict[str, Any]:
    return resolve(SAC_PRESETS, env_id, family)


def td3_preset(env_id: str, family: str) -> dict[str, Any]:
    return resolve(TD3_PRESETS, env_id, family)


def ddpg_preset(env_id: str, family: str) -> dict[str, Any]:
    return resolve(DDPG_PRESETS, env_id, family)
