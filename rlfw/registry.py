"""Samplers, algorithms and runners, each declared once.

Config validation, the CLI's choices, error texts and the docs' tables are all derived
from these registries. A user adds their own from a script, without editing rlfw::

    import rlfw
    rlfw.register_sampler("mine", MySampler)              # a SamplerBase subclass
    rlfw.register_algo("myalgo", MyAlgo, MyAlgoConfig, build_my_agent)
    rlfw.register_runner("myrunner", MyRunner)             # a Runner subclass
    config = RunConfig(sampler="mine", algo="myalgo")      # or --set sampler=mine

A registered algorithm's config is a dataclass with ``validate()``; it is reachable as
``config.<name>`` and settable as ``--set <name>.<field>=...`` like the built-in ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterator, Sequence, TypeVar

import gymnasium as gym

from rlfw.agents import ActorCriticAgent
from rlfw.agents.base import Agent
from rlfw.agents.dqn_agent import DqnAgent, RecurrentDqnAgent
from rlfw.agents.qpg_agent import QpgAgent
from rlfw.algos import A2C, DQN, PPO, A2CConfig, DQNConfig, PPOConfig
from rlfw.algos.base import ReplayAlgorithm
from rlfw.algos.dqn.categorical import C51, C51Config
from rlfw.algos.dqn.presets import c51_preset, dqn_preset, r2d1_preset, rainbow_preset
from rlfw.algos.dqn.r2d1 import R2D1, R2D1Config
from rlfw.algos.pg.presets import a2c_preset, ppo_preset
from rlfw.algos.qpg import SAC, TD3, DDPGConfig, SACConfig, TD3Config
from rlfw.algos.qpg.presets import ddpg_preset, sac_preset, td3_preset
from rlfw.envs import EnvSpaces, is_atari
from rlfw.envs.masks import masks_actions
from rlfw.models.cnn import model_kind
from rlfw.runners import AsyncRunner, ConcurrentRunner, SyncRunner
from rlfw.samplers import (
    AlternatingSampler,
    NativeAtariSampler,
    ParallelCpuSampler,
    ParallelGpuSampler,
    QueueSampler,
    SerialSampler,
)

# What a run's config gives a sampler beyond sizes and seed: (config, worker cores) -> kwargs.
SamplerOptions = Callable[[Any, Sequence[int] | None], dict[str, Any]]


# An algorithm's tuned settings for (env id, env family); see AlgoSpec.
Preset = Callable[[str, str], dict[str, Any]]


def no_preset(env_id: str, family: str) -> dict[str, Any]:
    return {}


# The RunConfig fields that shape an agent's network, whose use depends on the algorithm and
# on the env's spaces; (run config, spaces) -> {field it would not read: why}.
MODEL_SETTINGS = ("hidden", "activation", "log_std_init", "ortho_init", "sde_sample_freq")
UnreadSettings = Callable[[Any, EnvSpaces], dict[str, str]]


def reads_every_setting(config: Any, spaces: EnvSpaces) -> dict[str, str]:
    return {}


def no_options(config: Any, worker_cores: Sequence[int] | None) -> dict[str, Any]:
    return {}


def worker_options(config: Any, worker_cores: Sequence[int] | None) -> dict[str, Any]:
    """Samplers with worker processes: their count, pinning (to the affinity plan's cores)
    and start method."""
    pin = (worker_cores or True) if config.pin_cpus else False
    return {"n_workers": config.n_workers, "pin_cpus": pin, "start_method": config.start_method}


def native_options(config: Any, worker_cores: Sequence[int] | None) -> dict[str, Any]:
    return {"n_threads": config.n_workers}  # ALE's native threads stand for the workers


@dataclass(frozen=True)
class SamplerSpec:
    """A sampler kind: its class (built as ``cls(env_factory, batch_T=, batch_B=, seed=,
    n_eval_envs=, n_eval_workers=, **options(config, worker_cores))``), whether it has a
    worker count to set or tune (and into how many equal groups the workers split), and
    which env ids it runs (``None``: any)."""

    name: str
    cls: type
    summary: str = ""
    options: SamplerOptions = no_options
    has_workers: bool = False
    runs_env: Callable[[str], bool] | None = None
    env_note: str = ""  # what it runs, for errors, when not every env
    worker_groups: int = 1  # the worker count must be a multiple of this

    def build(
        self, env_factory: Any, batch_T: int, batch_B: int, seed: int = 0, **kwargs: Any
    ) -> Any:
        """The sampler with these sizes; ``kwargs`` are the class's own (``n_workers``...)."""
        return self.cls(env_factory, batch_T=batch_T, batch_B=batch_B, seed=seed, **kwargs)


@dataclass(frozen=True)
class AlgoSpec:
    """An algorithm: its class (built as ``algo_cls(config)``), its config dataclass,
    ``build_agent(run_config, spaces)`` for the agent it trains, ``preset(env_id,
    family)``: its tuned settings for an env (overrides of ``RunConfig`` fields, its own
    config as ``{name: {...}}``, schedule fields as ``{"schedule": {...}}``), and
    ``unread_model_settings(run_config, spaces)``: the model fields (``MODEL_SETTINGS``)
    ``build_agent`` would not read for that env, each with why (a user's setting of one is
    refused, as it would change nothing)."""

    name: str
    algo_cls: type
    config_cls: type
    build_agent: Callable[[Any, EnvSpaces], Agent]
    summary: str = ""
    preset: Preset = no_preset
    unread_model_settings: UnreadSettings = reads_every_setting

    @property
    def uses_replay(self) -> bool:
        """It learns from a replay (off-policy), not from each batch once (on-policy)."""
        return issubclass(self.algo_cls, ReplayAlgorithm)


@dataclass(frozen=True)
class RunnerSpec:
    """A runner kind (a ``rlfw.runners.Runner`` subclass)."""

    name: str
    cls: type
    summary: str = ""


Spec = TypeVar("Spec", SamplerSpec, AlgoSpec, RunnerSpec)


class Registry(Generic[Spec]):
    """Named specs of one extension point, in the order they were registered."""

    def __init__(self, kind: str):
        self.kind = kind
        self._specs: dict[str, Spec] = {}

    def add(self, spec: Spec, replace: bool = False) -> Spec:
        if not isinstance(spec.name, str) or not spec.name:
            raise ValueError(f"a {self.kind} name must be non-empty text, got {spec.name!r}")
        if spec.name in self._specs and not replace:
            raise ValueError(
                f"{self.kind} {spec.name!r} is registered already; pass replace=True to replace it"
            )
        self._specs[spec.name] = spec
        return spec

    def remove(self, name: str) -> None:
        self.get(name)
        del self._specs[name]

    def get(self, name: str) -> Spec:
        """The spec of ``name``; ``ValueError`` naming it and what is registered."""
        try:
            return self._specs[name]
        except (KeyError, TypeError):
            raise ValueError(f"{self.kind} {name!r} unknown; choose from {self.names()}") from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[Spec]:
        return iter(list(self._specs.values()))


SAMPLERS: Registry[SamplerSpec] = Registry("sampler")
ALGOS: Registry[AlgoSpec] = Registry("algorithm")
RUNNERS: Registry[RunnerSpec] = Registry("runner")


def _takes_n_workers(cls: type) -> bool:
    """Whether any constructor along ``cls``'s MRO names ``n_workers`` (a subclass's
    ``__init__(*args, **kwargs)`` forwards it to its base's)."""
    import inspect

    return any(
        "n_workers" in inspect.signature(k.__init__).parameters
        for k in cls.__mro__
        if "__init__" in vars(k)
    )


def register_sampler(
    name: str,
    cls: type,
    *,
    has_workers: bool | None = None,
    options: SamplerOptions | None = None,
    summary: str = "",
    runs_env: Callable[[str], bool] | None = None,
    env_note: str = "",
    worker_groups: int | None = None,
    replace: bool = False,
) -> SamplerSpec:
    """Make ``cls`` (a ``SamplerBase`` subclass) available as ``sampler=name``. By default a
    class whose constructor takes ``n_workers`` gets the worker options (count, pinning,
    start method) from the run's config, and its workers form ``cls.n_groups`` groups
    (an int class attribute; else one)."""
    if has_workers is None:
        has_workers = _takes_n_workers(cls)
    if options is None:
        options = worker_options if has_workers else no_options
    if worker_groups is None:
        declared = getattr(cls, "n_groups", 1)
        worker_groups = declared if isinstance(declared, int) and has_workers else 1
    return SAMPLERS.add(
        SamplerSpec(
            name,
            cls,
            summary or _first_line(cls),
            options,
            has_workers,
            runs_env,
            env_note,
            worker_groups,
        ),
        replace,
    )


def register_algo(
    name: str,
    algo_cls: type,
    config_cls: type,
    build_agent: Callable[[Any, EnvSpaces], Agent],
    *,
    summary: str = "",
    preset: Preset = no_preset,
    unread_model_settings: UnreadSettings = reads_every_setting,
    replace: bool = False,
) -> AlgoSpec:
    """Make ``algo_cls`` (an ``rlfw.algos.base.Algorithm``) available as ``algo=name``;
    ``config_cls()`` gives its default config, ``build_agent(run_config, spaces)`` the
    agent it trains, ``preset(env_id, family)`` its tuned settings and
    ``unread_model_settings`` the model fields that agent ignores (see ``AlgoSpec``)."""
    return ALGOS.add(
        AlgoSpec(
            name,
            algo_cls,
            config_cls,
            build_agent,
            summary or _first_line(algo_cls),
            preset,
            unread_model_settings,
        ),
        replace,
    )


def register_runner(
    name: str, cls: type, *, summary: str = "", replace: bool = False
) -> RunnerSpec:
    """Make ``cls`` (an ``rlfw.runners.Runner`` subclass) available as ``runner=name``."""
    return RUNNERS.add(RunnerSpec(name, cls, summary or _first_line(cls)), replace)


def _first_line(obj: Any) -> str:
    doc = (obj.__doc__ or "").strip()
    return doc.split("\n\n")[0].replace("\n", " ") if doc else ""


def sampler_table(specs: Sequence[SamplerSpec] | None = None) -> str:
    """The docs' table of samplers (default: all registered; docs/samplers.md holds rlfw's
    own and a test keeps it current)."""
    rows = ["| `--sampler` | class | envs | how it works |", "|---|---|---|---|"]
    for s in SAMPLERS if specs is None else specs:
        rows.append(f"| `{s.name}` | `{s.cls.__name__}` | {s.env_note or 'any'} | {s.summary} |")
    return "\n".join(rows)


# -- what rlfw ships ------------------------------------------------------------------------
def build_actor_critic(config: Any, spaces: EnvSpaces) -> ActorCriticAgent:
    return ActorCriticAgent.build(
        spaces,
        config.model,
        config.hidden,
        device=config.device,
        algo=config.algo,
        normalize_obs=config.normalize_obs,
        obs_clip=config.obs_clip,
        activation=config.activation,
        log_std_init=config.log_std_init,
        recurrent=config.recurrent,
        rnn_size=config.rnn_size,
        rnn_critic=config.rnn_critic,
        ortho_init=config.ortho_init,
        obs_norm_update=config.obs_norm_update,
        sde_sample_freq=config.sde_sample_freq,
        action_mask=masks_actions(spaces.observation, config.env_options.action_mask),
    )


def _image_net(config: Any, spaces: EnvSpaces) -> str | None:
    """Why ``hidden`` and ``activation`` go unread (the network is the CNN for the
    observations' image size), or None when the network is an MLP."""
    obs = spaces.observation
    if (
        not isinstance(obs, gym.spaces.Box)
        or model_kind(config.model, obs.shape, obs.dtype) != "cnn"
    ):
        return None
    return (
        f"with model={config.model!r} the network for {config.env}'s "
        f"{list(obs.shape)} images is the CNN for their size, whose layers are fixed; "
        "hidden and activation shape MLPs (model=mlp)"
    )


def actor_critic_unread(config: Any, spaces: EnvSpaces) -> dict[str, str]:
    """The model settings ``build_actor_critic`` ignores on ``spaces``' env."""
    image = _image_net(config, spaces)
    unread = dict.fromkeys(("hidden", "activation"), image) if image else {}
    if not isinstance(spaces.action, gym.spaces.Box):
        unread["log_std_init"] = (
            f"it is the initial log-std of Gaussian policies, and "
            f"{config.env}'s actions {spaces.action} are not a Box"
        )
        unread["sde_sample_freq"] = (
            f"it turns on gSDE exploration for Box actions, and "
            f"{config.env}'s actions {spaces.action} are not a Box"
        )
    if image or config.recurrent is not None:
        unread["ortho_init"] = (
            "it is for the feed-forward MLP actor-critic; CNN and "
            "recurrent networks are always initialized orthogonally"
        )
        unread.setdefault(
            "sde_sample_freq",
            "gSDE is for the feed-forward MLP actor-critic; "
            "CNN and recurrent networks explore with a "
            "plain Gaussian",
        )
    return unread


def q_network_unread(config: Any, spaces: EnvSpaces) -> dict[str, str]:
    """The model settings the Q-learners' agents (``build_dqn_agent``,
    ``build_r2d1_agent``) ignore on ``spaces``' env."""
    unread = {
        "activation": f"{config.algo}'s Q-network uses ReLU; activation is for ppo's "
        "and a2c's MLPs",
        "log_std_init": f"{config.algo} has no Gaussian policy",
        "sde_sample_freq": f"{config.algo} has no Gaussian policy to explore with gSDE",
        "ortho_init": f"{config.algo}'s Q-network has its own initialization (its "
        "CNN orthogonal, its MLP PyTorch's); ortho_init is for ppo's and "
        "a2c's MLP",
    }
    image = _image_net(config, spaces)
    if image:
        unread["hidden"] = image
    return unread


def build_dqn_agent(config: Any, spaces: EnvSpaces) -> DqnAgent:
    """The Q-learning agent of any DQN-family algorithm (its config: dueling, ε at
    evaluation, and for C51 the support)."""
    own = config.algo_config()
    return DqnAgent.build(
        spaces,
        config.batch_B,
        config.model,
        config.hidden,
        own.dueling,
        device=config.device,
        eval_epsilon=own.eval_epsilon,
        atoms=getattr(own, "atoms", 1),
        v_min=getattr(own, "v_min", -10.0),
        v_max=getattr(own, "v_max", 10.0),
        action_mask=masks_actions(spaces.observation, config.env_options.action_mask),
    )


def build_r2d1_agent(config: Any, spaces: EnvSpaces) -> RecurrentDqnAgent:
    """R2D1's agent: ε-greedy over an LSTM Q-network (MLP or CNN torso, dueling head)."""
    own = config.algo_config()
    if masks_actions(spaces.observation, config.env_options.action_mask):
        raise ValueError(
            f"r2d1 does not act over an action mask, and {config.env}'s observation has "
            "one: use dqn, c51, rainbow, ppo or a2c, or set env_options.action_mask=none"
        )
    return RecurrentDqnAgent.build_recurrent(
        spaces,
        config.batch_B,
        own.rnn_size,
        config.hidden,
        own.dueling,
        config.device,
        own.eval_epsilon,
        config.model,
    )


def build_qpg_agent(config: Any, spaces: EnvSpaces) -> QpgAgent:
    """The agent of SAC (a squashed Gaussian actor), TD3 and DDPG (a deterministic actor
    exploring with ``action_noise``), with ``n_critics`` Q-functions."""
    own = config.algo_config()
    return QpgAgent.build(
        spaces,
        "squashed_gaussian" if isinstance(own, SACConfig) else "deterministic",
        config.algo,
        config.model,
        config.hidden,
        own.critic_hidden,
        own.n_critics,
        config.activation,
        getattr(own, "action_noise", 0.0),
        config.device,
        config.normalize_obs,
        config.obs_clip,
        config.sde_sample_freq,
        config.log_std_init,
        getattr(own, "sde_expln", False),
    )


def qpg_unread(config: Any, spaces: EnvSpaces) -> dict[str, str]:
    """The model settings ``build_qpg_agent`` ignores."""
    unread = {
        "ortho_init": f"{config.algo}'s networks have PyTorch's default initialization, "
        "as SB3's; ortho_init is for ppo's and a2c's MLP",
    }
    if not config.sde_sample_freq:
        unread["log_std_init"] = (
            f"{config.algo}'s policy has no state-independent log-std without gSDE (SAC's "
            "comes from a head of the network; TD3's and DDPG's is deterministic)"
        )
    return unread


_ATARI_ONLY = "ALE games only ('ALE/<Game>-v5')"

register_sampler(
    "serial",
    SerialSampler,
    has_workers=False,
    summary="this process steps all B envs and runs the policy batched over B",
)
register_sampler(
    "cpu",
    ParallelCpuSampler,
    summary="N workers step B/N envs each with their own CPU copy of the agent, "
    "into shared memory; one message per batch, weights via shared memory",
)
register_sampler(
    "gpu",
    ParallelGpuSampler,
    summary="N workers only step envs; the master runs one batched forward pass "
    "over B (on cuda if the agent is there); two semaphores per worker "
    "per step",
)
register_sampler(
    "alternating",
    AlternatingSampler,
    summary="as gpu with two worker groups: the master runs one group's forward "
    "pass while the other group steps",
)
register_sampler(
    "native",
    NativeAtariSampler,
    has_workers=True,
    options=native_options,
    runs_env=is_atari,
    env_note=_ATARI_ONLY,
    summary="ale-py's C++ threads step and preprocess the games in two "
    "AtariVectorEnv groups; the master picks one group's actions while "
    "the other steps; lives, clipping and game statistics once per batch",
)
register_sampler(
    "queue",
    QueueSampler,
    summary="GA3C: N actor processes post observations to a prediction queue; "
    "the master batches whatever is waiting (up to a cap) into one "
    "forward pass and routes the actions back",
)

register_algo(
    "ppo",
    PPO,
    PPOConfig,
    build_actor_critic,
    preset=ppo_preset,
    unread_model_settings=actor_critic_unread,
)
register_algo(
    "a2c",
    A2C,
    A2CConfig,
    build_actor_critic,
    preset=a2c_preset,
    unread_model_settings=actor_critic_unread,
)
register_algo(
    "dqn",
    DQN,
    DQNConfig,
    build_dqn_agent,
    preset=dqn_preset,
    unread_model_settings=q_network_unread,
)
register_algo(
    "c51",
    C51,
    C51Config,
    build_dqn_agent,
    preset=c51_preset,
    unread_model_settings=q_network_unread,
)
register_algo(
    "rainbow",
    C51,
    C51Config,
    build_dqn_agent,
    preset=rainbow_preset,
    unread_model_settings=q_network_unread,
    summary="Rainbow minus noisy nets: C51 with 3-step double-Q targets, a dueling "
    "head and prioritized replay (rlfw/algos/dqn/presets.py)",
)
register_algo(
    "r2d1",
    R2D1,
    R2D1Config,
    build_r2d1_agent,
    preset=r2d1_preset,
    unread_model_settings=q_network_unread,
)

register_algo(
    "sac",
    SAC,
    SACConfig,
    build_qpg_agent,
    preset=sac_preset,
    unread_model_settings=qpg_unread,
)
register_algo(
    "td3",
    TD3,
    TD3Config,
    build_qpg_agent,
    preset=td3_preset,
    unread_model_settings=qpg_unread,
)
register_algo(
    "ddpg",
    TD3,
    DDPGConfig,
    build_qpg_agent,
    preset=ddpg_preset,
    unread_model_settings=qpg_unread,
    summary="DDPG as SB3 defines it: TD3 with one critic, no target smoothing and the "
    "actor updated every step (rlfw/algos/qpg/td3.py)",
)

register_runner(
    "sync",
    SyncRunner,
    summary="sample, then learn; no policy lag, bitwise deterministic with every sampler",
)
register_runner(
    "concurrent",
    ConcurrentRunner,
    summary="HTS-RL: sampling overlaps learning, policy lag exactly one, "
    "deterministic (on-policy algorithms)",
)
register_runner(
    "async",
    AsyncRunner,
    summary="sampler in its own process, free-running (replay algorithms: shared "
    "replay with the replay ratio enforced)",
)
