"""The benchmark's suites (lists of algorithm, env and budget) and the published numbers
each entry is read against."""

from __future__ import annotations

from dataclasses import dataclass

from rlfw.launch.presets import preset


@dataclass(frozen=True)
class Ablation:
    """An entry's rlfw runs again with ``settings`` (dotted config keys, values) on top of
    the preset, reported beside it as the framework ``rlfw <label>``: what the preset's
    values of those settings buy (``about`` says what changes)."""

    label: str
    settings: tuple[tuple[str, str], ...]
    about: str

    @property
    def framework(self) -> str:
        return f"rlfw {self.label}"


@dataclass(frozen=True)
class Entry:
    """One line of a suite: an algorithm on an env for ``steps`` env steps (None: the
    preset's budget). ``peer``: False where SB3 has no counterpart of this entry (rlfw's
    runs only, with or without ``--peer``); ``ablation``: rlfw's runs again with some
    settings changed."""

    algo: str
    env: str
    steps: int | None = None
    peer: bool = True
    ablation: Ablation | None = None

    @property
    def budget(self) -> int:
        return self.steps or int(preset(self.algo, self.env)["schedule"]["n_steps"])

    @property
    def name(self) -> str:
        return f"{self.algo}-{self.env.replace('/', '_')}"


@dataclass(frozen=True)
class Suite:
    """Entries run for ``seeds`` seeds. ``peer_settings``: the SB3 peer runs on
    rl-baselines3-zoo's tuned settings for the env ("zoo") or, where the zoo has none,
    on rlfw's preset with rlfw's network ("same": ``rlfw.bench.same_settings``)."""

    entries: tuple[Entry, ...]
    seeds: int = 3
    about: str = ""
    peer_settings: str = "zoo"
    time_goal: float = 0.7  # rlfw's wall-clock at most this x the peer's
    # (suite, algo): that suite's rlfw runs of algo on this suite's envs, read alongside
    baseline: tuple[str, str] | None = None
    has_peer: bool = True  # False: SB3 has no implementation of these algorithms
    decimals: int = 1  # of the returns in the report (2 where returns lie within [-1, 1])


MINATAR_GAMES = ("Breakout", "SpaceInvaders", "Asterix", "Freeway")
# Budgets that fit 2 cores (measured, one thread per run, two runs at once): rlfw's and
# SB3's PPO step ~8k env steps/s on MinAtar (24 runs of 2M: ~1 h), their DQN ~500-800
# (one update of 32 per step; 24 runs of 250k: ~1.7 h). DQN's 250k is 1/20 of the MinAtar
# paper's 5M frames: it shows the early curve, not the final score.
MINATAR_BUDGET = {"ppo": 2_000_000, "dqn": 250_000, "pqn": 2_000_000}
# PQN on two of the games at PPO's budget (issue 72); SB3 has no PQN, so rlfw's runs only
PQN_MINATAR_GAMES = ("Breakout", "SpaceInvaders")
NO_MASK = Ablation(
    "no-mask",
    (("env_options.action_mask", "none"),),
    "the same runs with env_options.action_mask=none: the agent may choose an invalid "
    "action (Taxi: -10 and nothing happens; connect four: an illegal move loses)",
)
# The settings behind Tianshou's published SAC curves (examples/mujoco/mujoco_sac.py), where
# they differ from the zoo's: what the gap to its 100k numbers owes to settings, not code.
TIANSHOU_SAC = Ablation(
    "tianshou",
    (("sac.learning_rate", "0.001"), ("sac.ent_coef", "0.2")),
    "the same runs on Tianshou's mujoco_sac.py settings where they differ from the zoo's: "
    "learning rate 1e-3 (actor and critics) and the entropy coefficient fixed at 0.2 "
    "(the rest matches: 256x256, batch 256, tau 0.005, 10k random steps first)",
)

# Presets found with `rlfw tune` (issue 74), each against the settings it replaced: the
# family's, given back as an ablation on top of the tuned preset. The suite's seeds 0-4
# are not the studies' (100-115).
PPO_MOUNTAINCAR_BEFORE = Ablation(
    "before-tuning",
    (
        ("normalize_obs", "false"),
        ("batch_T", "32"),
        ("ppo.minibatch_size", "256"),
        ("ppo.gamma", "0.98"),
        ("ppo.gae_lambda", "0.8"),
        ("ppo.learning_rate", "0.001"),
        ("ppo.entropy_coef", "0.0"),
        ("ppo.max_grad_norm", "0.5"),
        ("ppo.clip", "0.2"),
    ),
    "the same runs on the settings PPO had on MountainCar before tuning (the classic "
    "family's: rl-baselines3-zoo's CartPole block), at the tuned preset's 200k steps",
)
# A study's best trial that did not hold on fresh seeds (one seed per trial picked a lucky
# one): not adopted, kept as the measurement that says so.
A2C_ACROBOT_TUNED = Ablation(
    "tuned",
    (
        ("batch_T", "64"),
        ("hidden", "256,256"),
        ("a2c.gamma", "0.9996"),
        ("a2c.gae_lambda", "0.9997"),
        ("a2c.learning_rate", "0.0017"),
        ("a2c.entropy_coef", "0.05"),
        ("a2c.max_grad_norm", "1.3"),
    ),
    "the same runs on the best trial of rlfw tune's A2C Acrobot-v1 study "
    "(studies/a2c-Acrobot-v1/, rounded): not adopted",
)
A2C_MOUNTAINCAR_TUNED = Ablation(
    "tuned",
    (
        ("normalize_obs", "true"),
        ("batch_T", "128"),
        ("activation", "relu"),
        ("a2c.gamma", "0.999"),
        ("a2c.gae_lambda", "0.97"),
        ("a2c.learning_rate", "0.000067"),
        ("a2c.entropy_coef", "0.0000016"),
        ("a2c.max_grad_norm", "1.0"),
    ),
    "the same runs on the best trial of rlfw tune's A2C MountainCar-v0 study "
    "(studies/a2c-MountainCar-v0/, rounded; the only trial of 16 that reached the flag)",
)

SUITES: dict[str, Suite] = {
    "smoke": Suite(
        (Entry("ppo", "CartPole-v1", 2_048), Entry("a2c", "CartPole-v1", 2_048)),
        seeds=2,
        about="two tiny entries: the whole pipeline in about a minute",
    ),
    "classic": Suite(
        (
            Entry("ppo", "CartPole-v1"),
            Entry("ppo", "Acrobot-v1"),
            Entry("ppo", "Pendulum-v1"),
            Entry("ppo", "MountainCarContinuous-v0"),
            Entry("a2c", "CartPole-v1"),
            Entry("dqn", "CartPole-v1"),
            Entry("pqn", "CartPole-v1", peer=False),
            Entry("pqn", "Acrobot-v1", peer=False),
            Entry("sac", "Pendulum-v1"),
            Entry("td3", "Pendulum-v1"),
            Entry("ddpg", "Pendulum-v1"),
        ),
        about="classic control, each at its preset's budget",
    ),
    "mujoco": Suite(
        (Entry("ppo", "HalfCheetah-v5", 300_000), Entry("ppo", "Hopper-v5", 300_000)),
        about="MuJoCo at 300k steps (what fits a 2-core machine)",
    ),
    "mujoco-offpolicy": Suite(
        (
            Entry("sac", "HalfCheetah-v5", 100_000, ablation=TIANSHOU_SAC),
            Entry("sac", "Hopper-v5", 100_000, ablation=TIANSHOU_SAC),
            Entry("sac", "Walker2d-v5", 100_000),
            Entry("td3", "HalfCheetah-v5", 100_000),
            Entry("td3", "Hopper-v5", 100_000),
        ),
        time_goal=0.5,
        about="SAC and TD3 on MuJoCo at 100k steps, one update per step (Tianshou's "
        "small-budget table); long on 2 cores: about 20 minutes a run",
    ),
    "mujoco-1m": Suite(
        tuple(
            Entry(algo, env, 1_000_000)
            for algo in ("ppo", "a2c")
            for env in ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Swimmer-v5")
        ),
        about="MuJoCo at 1M steps, for a bigger machine",
    ),
    "minatar": Suite(
        tuple(
            Entry(algo, f"MinAtar/{game}-v1", MINATAR_BUDGET[algo])
            for algo in ("ppo", "dqn")
            for game in MINATAR_GAMES
        )
        + tuple(
            Entry("pqn", f"MinAtar/{game}-v1", MINATAR_BUDGET["pqn"], peer=False)
            for game in PQN_MINATAR_GAMES
        ),
        peer_settings="same",
        time_goal=0.5,
        about="MinAtar (PPO 2M, DQN 250k steps; the peer is SB3 with rlfw's "
        "settings and network; PQN 2M on Breakout and SpaceInvaders, rlfw's alone), "
        "about 3.5 hours with its peer on 2 cores",
    ),
    "minatar-qlearning": Suite(
        tuple(
            Entry(algo, f"MinAtar/{game}-v1", MINATAR_BUDGET["dqn"])
            for algo in ("c51", "rainbow")
            for game in ("Breakout", "SpaceInvaders")
        ),
        baseline=("minatar", "dqn"),
        has_peer=False,
        about="C51 and Rainbow minus noisy nets on two MinAtar games "
        "at DQN's budget, read against the minatar suite's DQN "
        "entries (docs/dqn.md); about 1.5 hours on 2 cores",
    ),
    "minatar-smoke": Suite(
        (Entry("ppo", "MinAtar/Breakout-v1", 4_096), Entry("dqn", "MinAtar/Breakout-v1", 6_000)),
        seeds=1,
        peer_settings="same",
        about="the MinAtar pipeline with tiny budgets, in a minute",
    ),
    "spaces": Suite(
        (
            Entry("ppo", "MiniGrid-DoorKey-5x5-v0"),
            Entry("ppo", "Taxi-v4", ablation=NO_MASK),
            Entry("ppo", "rlfw/ConnectFour-v0", ablation=NO_MASK),
            Entry("dqn", "Taxi-v4", peer=False),
        ),
        peer_settings="same",
        time_goal=0.6,
        decimals=2,
        about="observations beyond a Box and invalid-action masks, each at its preset's "
        "budget: MiniGrid's Dict of tile codes and direction, Taxi's mask in info, connect "
        "four's in the observation (against a random player); the peer is SB3 with rlfw's "
        "settings and observation encoder, sb3-contrib's MaskablePPO where the env has a "
        "mask (SB3 has no masked DQN); about 40 minutes with its peer on 2 cores",
    ),
    "multiagent": Suite(
        tuple(Entry(algo, "mpe2.simple_spread_v3", peer=False) for algo in ("ippo", "mappo")),
        has_peer=False,
        about="many agents: MPE simple_spread (3 agents, 25-step episodes, the team return "
        "summed over agents) with IPPO and MAPPO at the family preset's 1M agent steps; "
        "about 20 minutes on 2 cores",
    ),
    "tuned": Suite(
        (
            Entry("a2c", "Acrobot-v1", peer=False, ablation=A2C_ACROBOT_TUNED),
            Entry("ppo", "MountainCar-v0", peer=False, ablation=PPO_MOUNTAINCAR_BEFORE),
            Entry("a2c", "MountainCar-v0", 200_000, peer=False, ablation=A2C_MOUNTAINCAR_TUNED),
        ),
        seeds=5,
        has_peer=False,
        about="presets found with rlfw tune against the settings they replaced, 5 seeds "
        "the studies did not use; a few minutes on 2 cores",
    ),
    "atari": Suite(
        tuple(
            Entry(algo, env, 10_000_000)
            for algo in ("ppo", "dqn")
            for env in ("ALE/Pong-v5", "ALE/Breakout-v5")
        ),
        about="Atari at 10M steps (40M frames), for a machine with a GPU",
    ),
}

# Published final returns, with their source: (algo, env without version) -> lines. The
# zoo's table (rl-baselines3-zoo benchmark.md) is one trained agent per line, deterministic
# evaluation, "mean ± std over episodes"; CleanRL's is mean ± std over seeds.
_ZOO = "rl-baselines3-zoo benchmark.md, one run"
# Tianshou's published curves (examples/mujoco/benchmark/<env>-v3/<algo>/test_rew_10seeds.csv):
# mean ± std over 10 seeds of each seed's policy at a step (10 deterministic test episodes),
# as this suite's final return is. Its steps count from after the random warm-up (its
# trainer's env_step starts at 0 once the warm-up is collected), so this suite's 100k env
# steps are its row at 100k minus the warm-up; its row at 100k has the warm-up's worth more
# steps and updates.
_TIANSHOU_SETTINGS = {
    "sac": ("with lr 1e-3 and the entropy coefficient at 0.2", 10_000),
    "td3": ("with lr 3e-4 and a 256x256 MLP", 25_000),
}


def _tianshou(algo: str, env: str, at_budget: str, at_100k: str) -> str:
    settings, warmup = _TIANSHOU_SETTINGS[algo]
    return (
        f"{at_budget} (Tianshou's {algo.upper()} {settings}, {env}-v3, 10 seeds, the policy "
        f"after 100k env steps as here: {warmup // 1000}k random, then "
        f"{(100_000 - warmup) // 1000}k updates); its row at 100k, {at_100k}, is after "
        f"{(100_000 + warmup) // 1000}k env steps and 100k updates"
    )


REFERENCES: dict[tuple[str, str], tuple[str, ...]] = {
    ("ppo", "CartPole"): (f"500.0 ± 0.0 ({_ZOO}, CartPole-v1, 100k steps)",),
    ("a2c", "CartPole"): (f"500.0 ± 0.0 ({_ZOO}, CartPole-v1, 500k steps)",),
    ("dqn", "CartPole"): (f"500.0 ± 0.0 ({_ZOO}, CartPole-v1, 50k steps)",),
    ("ppo", "Acrobot"): (f"-73.5 ± 18.2 ({_ZOO}, Acrobot-v1, 1M steps)",),
    # CleanRL's docs/rl-algorithms/pqn.md: mean ± std over seeds of the training episodes'
    # return at the end (ε-greedy at 0.05), 500k steps
    ("pqn", "CartPole"): ("495.13 ± 6.89 (CleanRL pqn.py, CartPole-v1, 500k steps)",),
    ("pqn", "Acrobot"): ("-95.63 ± 5.73 (CleanRL pqn.py, Acrobot-v1, 500k steps)",),
    ("ppo", "Pendulum"): (f"-172.2 ± 104.2 ({_ZOO}, Pendulum-v1 with gSDE, 100k steps)",),
    ("ppo", "MountainCarContinuous"): (
        "94.57 ± 0.45 (rl-baselines3-zoo's trained agent on the Hugging Face hub, "
        "sb3/ppo-MountainCarContinuous-v0, with gSDE, 20k steps, one run)",
    ),
    ("ppo", "HalfCheetah"): (
        f"5,819 ± 664 ({_ZOO}, HalfCheetah-v3, 1M steps)",
        "1,443 ± 46 (CleanRL ppo_continuous_action, HalfCheetah-v4, 1M steps)",
    ),
    ("ppo", "Hopper"): (f"2,410 ± 10 ({_ZOO}, Hopper-v3, 1M steps)",),
    ("ppo", "Walker2d"): (f"3,479 ± 822 ({_ZOO}, Walker2d-v3, 1M steps)",),
    ("ppo", "Ant"): (f"1,327 ± 452 ({_ZOO}, Ant-v3, 1M steps)",),
    ("ppo", "Swimmer"): (f"281.6 ± 9.7 ({_ZOO}, Swimmer-v3, 1M steps)",),
    ("a2c", "HalfCheetah"): (f"3,041 ± 157 ({_ZOO}, HalfCheetah-v3, 1M steps)",),
    ("a2c", "Hopper"): (f"733 ± 377 ({_ZOO}, Hopper-v3, 1M steps)",),
    ("a2c", "Swimmer"): (f"200.6 ± 2.5 ({_ZOO}, Swimmer-v3, 1M steps)",),
    ("sac", "Pendulum"): ("-157 (rl-baselines3-zoo's SAC, Pendulum-v1, 20k steps)",),
    ("td3", "Pendulum"): ("-152 (rl-baselines3-zoo's TD3, Pendulum-v1, 20k steps)",),
    ("sac", "HalfCheetah"): (
        f"9,535 ({_ZOO}, HalfCheetah-v3, 1M steps)",
        _tianshou("sac", "HalfCheetah", "6,213 ± 437", "6,515 ± 514"),
    ),
    ("sac", "Hopper"): (
        f"2,326 ({_ZOO}, Hopper-v3, 1M steps)",
        _tianshou("sac", "Hopper", "1,766 ± 1,036", "2,613 ± 991"),
    ),
    ("sac", "Walker2d"): (
        f"3,863 ({_ZOO}, Walker2d-v3, 1M steps)",
        _tianshou("sac", "Walker2d", "844 ± 707", "1,305 ± 795"),
    ),
    ("td3", "HalfCheetah"): (_tianshou("td3", "HalfCheetah", "4,715 ± 387", "5,336 ± 376"),),
    ("td3", "Hopper"): (_tianshou("td3", "Hopper", "336 ± 81", "597 ± 288"),),
    ("ppo", "MiniGrid-DoorKey-5x5"): (
        f"0.964 ± 0.006 ({_ZOO}, MiniGrid-DoorKey-5x5-v0 through FlatObsWrapper, 100k steps)",
    ),
    ("ppo", "rlfw/ConnectFour"): (
        "win rate 0.86 against a random player at 20,480 steps (PettingZoo's connect four "
        "tutorial with sb3-contrib's MaskablePPO; a return here is wins minus losses)",
    ),
    ("ppo", "ALE/Pong"): (f"21.0 ± 0.1 ({_ZOO}, PongNoFrameskip-v4, 10M steps)",),
    ("ppo", "ALE/Breakout"): (f"398 ± 33 ({_ZOO}, BreakoutNoFrameskip-v4, 10M steps)",),
    ("dqn", "ALE/Pong"): (f"20.6 ± 0.6 ({_ZOO}, PongNoFrameskip-v4, 10M steps)",),
    ("dqn", "ALE/Breakout"): (f"358 ± 62 ({_ZOO}, BreakoutNoFrameskip-v4, 10M steps)",),
}


_MINATAR_PAPER = (
    "MinAtar paper (Young & Tian 2019), Fig. 2 and the MinAtar README's "
    "curves: DQN over 5M frames, mean over 30 seeds"
)
# gymnax-blines' PPO (no sticky actions, episodes capped at 1,000 steps): its final at 10M
# steps, and for Breakout its curve at this suite's 2M
_GYMNAX_BLINES = {
    "Breakout": "gymnax-blines' PPO: ~16 (lr 5e-4) to ~18-20 (lr 1e-3) at 2M steps, 28 at 10M",
    "SpaceInvaders": "gymnax-blines' PPO: 131 at 10M steps",
    "Asterix": "gymnax-blines' PPO: 15 at 10M steps",
    "Freeway": "gymnax-blines' PPO: 58 at 10M steps",
}
for _game in MINATAR_GAMES:
    REFERENCES[("dqn", f"MinAtar/{_game}")] = (_MINATAR_PAPER,)
    REFERENCES[("ppo", f"MinAtar/{_game}")] = (_GYMNAX_BLINES[_game],)


def references(entry: Entry) -> tuple[str, ...]:
    """Published lines for the entry: keyed by env id without version, Atari's and
    MinAtar's with their prefix (their Breakouts are different games)."""
    family, _, name = entry.env.rpartition("/")
    base = name.rsplit("-v", 1)[0]
    return REFERENCES.get((entry.algo, f"{family}/{base}" if family else base), ())
