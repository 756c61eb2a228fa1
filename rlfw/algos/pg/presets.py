"""PPO's and A2C's tuned settings per env family (``AlgoSpec.preset``), each with its source.

Classic control: rl-baselines3-zoo's CartPole settings (PPO on Acrobot: the zoo's Acrobot
entry, ``CLASSIC_PPO``). Continuous classic control (Box actions: Pendulum-v1,
MountainCarContinuous-v0): the zoo's Pendulum settings with observation and reward
normalization (PPO on Pendulum and MountainCarContinuous, A2C on Pendulum: the zoo's own
entries, with gSDE, ``CONTINUOUS_PPO`` and ``CONTINUOUS_A2C``). MuJoCo: PPO on
HalfCheetah, Hopper, Walker2d, Ant and Swimmer takes the zoo's tuned settings for that env
(``MUJOCO_PPO``); other MuJoCo ids and A2C take CleanRL's / the PPO and A2C papers'
MuJoCo settings, normalized. Atari: the PPO paper's settings as CleanRL runs them
(``ATARI_PPO``) and the A2C/A3C paper's.
``rlfw/CartPoleNoVel-v1`` (for recurrent agents): the CartPole settings with normalized
observations and one 64-unit layer before the core, 150k steps.
"""
from __future__ import annotations

from typing import Any

from rlfw.envs import CARTPOLE_NO_VELOCITY
from rlfw.envs.families import base_name, merge_settings


def ppo_preset(env_id: str, family: str) -> dict[str, Any]:
    if family in ("continuous", "mujoco"):
        out = _continuous("ppo", family)
        tuned = MUJOCO_PPO if family == "mujoco" else CONTINUOUS_PPO
        out = merge_settings(out, tuned.get(base_name(env_id), {}))
    elif family == "minatar":
        out = MINATAR_PPO
    elif family == "atari":
        out = ATARI_PPO
    else:
        out = {"batch_B": 8, "batch_T": 32, "ppo": dict(
            learning_rate=1e-3, anneal_lr=True, gamma=0.98, gae_lambda=0.8, epochs=20,
            minibatch_size=256, clip=0.2, anneal_clip=True, entropy_coef=0.0)}
        out = merge_settings(out, CLASSIC_PPO.get(base_name(env_id), {}))
    return _partial_observability(env_id, out)


def a2c_preset(env_id: str, family: str) -> dict[str, Any]:
    if family in ("continuous", "mujoco"):
        out = _continuous("a2c", family)
        if family == "continuous":
            out = merge_settings(out, CONTINUOUS_A2C.get(base_name(env_id), {}))
    elif family in ("atari", "minatar"):  # the A3C paper's Atari setup, synchronous
        out = {"batch_B": 16, "batch_T": 5, "a2c": dict(
            learning_rate=7e-4, entropy_coef=0.01, value_coef=0.25)}
    else:
        out = {"batch_B": 8, "batch_T": 5, "a2c": dict(learning_rate=7e-4, entropy_coef=0.0)}
    return _partial_observability(env_id, out)


# The PPO paper's Atari settings as CleanRL's ppo_atari runs them: 8 envs x 128 steps, lr
# 2.5e-4 annealed to 0, clip 0.1 on the policy and the value, entropy 0.01, Adam eps 1e-5.
# The paper also annealed the clip range with the learning rate; CleanRL keeps it at 0.1,
# and so does this preset: annealed, it fell to 0.03 by 5.6M of Pong's 8M frames here, the
# policy stopped moving (approx. KL 1e-4) and evaluation stalled at 16-17. CleanRL reaches
# its score after 40M frames; this machine's budget is 10M, so each sample drives 8x the
# gradient steps (8 epochs of 8 minibatches of 128 instead of 4 of 4 of 256): with 4 epochs
# of 128, two Pong seeds ended at 18.7 and 19.1; with 8 three learned earlier (17.4, 17.9,
# 10.5 at 2M frames against -7.0, -3.2) and ended at 21.0, 19.6, 19.3. bf16 autocast (AMX /
# AVX512-BF16 CPUs, GPUs) pays for the extra epochs: the learner took 122 s per 100k steps
# for 8 against float32's 100.6 s for 4 (docs/benchmarks/atari/README.md). On a CPU
# without bf16 units, `--set ppo.amp=none`. The value loss weighs 0.5, rl-zoo's Atari
# vf_coef in the same form (twice CleanRL's, whose vf_coef 0.5 takes half the squared
# error): every Pong run above had it.
ATARI_PPO: dict[str, Any] = {"batch_B": 8, "batch_T": 128, "ppo": dict(
    learning_rate=2.5e-4, anneal_lr=True, optimizer_eps=1e-5, epochs=8, minibatch_size=128,
    clip=0.1, anneal_clip=False, value_clip=0.1, value_coef=0.5, entropy_coef=0.01,
    amp="bf16")}

# PureJaxRL's / pgx's MinAtar PPO (pgx examples/minatar-ppo: lr 3e-4, 3 epochs, γ 0.99,
# λ 0.95, clip 0.2, entropy 0.01, grad norm 0.5, advantages normalized per minibatch, Adam
# eps 1e-5, no annealing), its batch scaled from 4096 envs x 128 steps to what 2 cores
# step: 16 envs x 128 steps, 8 minibatches of 256. Value 0.25: pgx's vf_coef 0.5 on half
# the squared error (until 2026-12-05 this preset had 0.5, and the scaling study's MinAtar
# PPO runs did). No value clipping, where pgx clips the value at 0.2 in the larger-error
# form (the scaling study's runs did): with it two of five Freeway seeds plateaued (31, 44
# against 58-62); without it none did, and SpaceInvaders scored highest (median 104.9
# against 99.0, and 73.9 in SB3's form); Asterix's seeds spread 3-18 under every form
# (docs/minatar.md). Engstrom et al. (2020) and Andrychowicz et al. (2021) found value
# clipping of no help to PPO either.
MINATAR_PPO: dict[str, Any] = {"batch_B": 16, "batch_T": 128, "ppo": dict(
    learning_rate=3e-4, anneal_lr=False, optimizer_eps=1e-5, gamma=0.99, gae_lambda=0.95,
    epochs=3, minibatch_size=256, clip=0.2, anneal_clip=False, value_clip=None,
    entropy_coef=0.01, value_coef=0.25, max_grad_norm=0.5, normalize_advantage=True)}


def _partial_observability(env_id: str, out: dict[str, Any]) -> dict[str, Any]:
    if env_id != CARTPOLE_NO_VELOCITY:
        return out
    # rl-zoo's ppo_lstm CartPoleNoVel-v1: the CartPole settings, observations normalized
    # (positions only: their scale is all the memory has to go on); one 64-unit layer
    # before the core (with 64-64 the final LSTM policy held 500 for 2 of seeds 0-2 at 150k
    # as well, but seed 1 ended at 321 against 486 here).
    return {**out, "normalize_obs": True, "hidden": (64,), "schedule": {"n_steps": 150_000}}


# rl-baselines3-zoo's PPO entries for Box-action classic control, as written, on top of
# the family preset. Pendulum: gSDE every 4 steps, no normalization, Adam eps 1e-5. Over 7
# seeds at 200k (docs/benchmarks/gsde/) its IQM is -206.9 [-256.5, -170.5], the worst seed
# -316, against the family preset's -222.0 [-367.9, -169.6] with two seeds at -344 and
# -534, and SB3's -223.2 [-329.6, -172.3] on the same entry; the family preset with gSDE
# added did worse (-244.7). MountainCarContinuous: gSDE drawn once per rollout (SB3's
# sde_sample_freq -1; here every batch_T = 8 steps) from a log-std of -3.29, at the zoo's
# 20k-step budget. With the Pendulum settings every seed (0-2, at 20k or 200k) ends near
# 0, the car never reaching the flag; with these 6 of 7 seeds solve it (90-95), with gSDE
# or without (SB3 on the same entry: 4 of 7).
CONTINUOUS_PPO: dict[str, dict[str, Any]] = {
    "Pendulum": {"normalize_obs": False, "sde_sample_freq": 4, "ppo": dict(
        normalize_reward=False, optimizer_eps=1e-5)},
    "MountainCarContinuous": {
        "batch_B": 1, "batch_T": 8, "log_std_init": -3.29, "ortho_init": False,
        "sde_sample_freq": 8, "schedule": {"n_steps": 20_000}, "ppo": dict(
            learning_rate=7.77e-5, gamma=0.9999, gae_lambda=0.9, epochs=10,
            minibatch_size=256, clip=0.1, entropy_coef=0.00429, value_coef=0.19,
            max_grad_norm=5.0, normalize_reward=True, optimizer_eps=1e-5)}}

# rl-baselines3-zoo's A2C Pendulum-v1 entry as written, on top of the family preset (which
# is that entry without its exploration and network settings): gSDE drawn once per 8-step
# rollout from a log-std of -2, no orthogonal init, at the zoo's 1M-step budget. Over 7
# seeds at 1M (docs/benchmarks/gsde/) its finals run -128 to -217 (IQM -179.9, median
# -191.1), the family preset's -264 to -1058 (IQM -334.3), SB3's on the same entry -123
# to -463 (IQM -170.3); at 200k none learns (medians -886, -1144 and -886).
CONTINUOUS_A2C: dict[str, dict[str, Any]] = {
    "Pendulum": {"sde_sample_freq": 8, "log_std_init": -2.0, "ortho_init": False,
                 "schedule": {"n_steps": 1_000_000}}}

# rl-baselines3-zoo's tuned PPO settings for gymnasium's MuJoCo envs (its -v4 entries;
# SB3's PPO defaults where the zoo sets nothing), as facts on top of the family preset:
# observations and rewards normalized (VecNormalize), no LR or clip annealing, no value
# clipping, one env unless said. Unlisted MuJoCo ids keep the family preset (CleanRL's).
_SB3_PPO = dict(learning_rate=3e-4, anneal_lr=False, gamma=0.99, gae_lambda=0.95, epochs=10,
                minibatch_size=64, clip=0.2, value_clip=None, entropy_coef=0.0,
                value_coef=0.5, max_grad_norm=0.5, normalize_reward=True)
_ZOO_NET = {"hidden": (256, 256), "activation": "relu", "log_std_init": -2.0,
            "ortho_init": False}
_SB3_NET = {"hidden": (64, 64), "activation": "tanh", "log_std_init": 0.0, "ortho_init": True}
MUJOCO_PPO: dict[str, dict[str, Any]] = {
    "HalfCheetah": {**_ZOO_NET, "batch_B": 1, "batch_T": 512, "ppo": {
        **_SB3_PPO, "learning_rate": 2.0633e-05, "gamma": 0.98, "gae_lambda": 0.92,
        "epochs": 20, "clip": 0.1, "entropy_coef": 0.000401762, "value_coef": 0.58096,
        "max_grad_norm": 0.8}},
    "Hopper": {**_ZOO_NET, "batch_B": 1, "batch_T": 512, "ppo": {
        **_SB3_PPO, "learning_rate": 9.80828e-05, "gamma": 0.999, "gae_lambda": 0.99,
        "epochs": 5, "minibatch_size": 32, "clip": 0.2, "entropy_coef": 0.00229519,
        "value_coef": 0.835671, "max_grad_norm": 0.7}},
    "Walker2d": {**_SB3_NET, "batch_B": 1, "batch_T": 512, "ppo": {
        **_SB3_PPO, "learning_rate": 5.05041e-05, "gamma": 0.99, "gae_lambda": 0.95,
        "epochs": 20, "minibatch_size": 32, "clip": 0.1, "entropy_coef": 0.000585045,
        "value_coef": 0.871923, "max_grad_norm": 1.0}},
    "Ant": {**_SB3_NET, "batch_B": 1, "batch_T": 2048, "ppo": dict(_SB3_PPO)},
    "Swimmer": {**_SB3_NET, "batch_B": 4, "batch_T": 1024, "ppo": {
        **_SB3_PPO, "learning_rate": 6e-4, "gamma": 0.9999, "gae_lambda": 0.98,
        "minibatch_size": 256}},
}


# rl-baselines3-zoo's PPO entry for a classic-control env where it is not the CartPole one
# (SB3's defaults where the zoo sets nothing): Acrobot normalizes observations and rewards
# and takes 16 envs x 256 steps, 4 epochs. 3 seeds at 120k, final policy over 20 greedy
# episodes: -78.8, -80.8, -79.7 here against -75.8, -78.5, -79.8 with the CartPole
# settings plus normalization, in 0.87x their time (docs/notes/2026-12-05-results-log.md).
CLASSIC_PPO: dict[str, dict[str, Any]] = {
    "Acrobot": {"normalize_obs": True, "batch_B": 16, "batch_T": 256, "ppo": {
        **_SB3_PPO, "gamma": 0.99, "gae_lambda": 0.94, "epochs": 4, "anneal_clip": False}},
}


def _continuous(algo: str, family: str) -> dict[str, Any]:
    """Box-action presets: observations normalized and clipped to ±10 in the model,
    rewards scaled by the discounted return's running std (VecNormalize's defaults)."""
    common = {"normalize_obs": True, "hidden": (64, 64)}
    if algo == "ppo" and family == "mujoco":  # CleanRL ppo_continuous_action
        # value 0.25: CleanRL's vf_coef 0.5 on half the squared error
        return {**common, "batch_B": 1, "batch_T": 2048, "ppo": dict(
            learning_rate=3e-4, anneal_lr=True, gamma=0.99, gae_lambda=0.95, epochs=10,
            minibatch_size=64, clip=0.2, value_clip=0.2, entropy_coef=0.0,
            value_coef=0.25, max_grad_norm=0.5, normalize_reward=True)}
    if algo == "ppo":  # the zoo's Pendulum-v1 settings, normalized, without gSDE
        # (Pendulum itself runs the zoo's entry as written: CONTINUOUS_PPO). Adam eps 1e-8:
        # 3 seeds ended -227/-165/-158 with it and -206/-540/-580 with 1e-5 on one host.
        return {**common, "batch_B": 4, "batch_T": 1024, "ppo": dict(
            learning_rate=1e-3, gamma=0.9, gae_lambda=0.95, epochs=10, minibatch_size=64,
            clip=0.2, entropy_coef=0.0, max_grad_norm=0.5, normalize_reward=True,
            optimizer_eps=1e-8)}
    if family == "mujoco":  # A2C paper's continuous setup, synchronous, 8 envs x 5 steps
        return {**common, "batch_B": 8, "batch_T": 5, "a2c": dict(
            learning_rate=7e-4, anneal_lr=True, gamma=0.99, gae_lambda=1.0,
            normalize_reward=True)}
    return {**common, "batch_B": 8, "batch_T": 8, "a2c": dict(  # zoo Pendulum-v1 A2C
        learning_rate=7e-4, anneal_lr=True, gamma=0.9, gae_lambda=0.9, value_coef=0.4,
        normalize_reward=True)}
