"""One typed config for a whole run (``RunConfig``: saved as ``config.json``), built from a
preset (``RunConfig.for_env``) and overrides; ``rlfw.launch.build`` assembles the run."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import typing
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Callable

import torch

from rlfw.envs import AtariOptions, EnvFactory, EnvOptions, EnvSpaces, is_atari
from rlfw.launch.presets import env_family, multiagent_batch, preset, schedule_for
from rlfw.logging.video import imageio_module
from rlfw.logging.wandb_writer import WandbOptions, wandb_module
from rlfw.models.cnn import MODELS, check_model
from rlfw.models.normalize import OBS_NORM_UPDATES
from rlfw.models.recurrent import check_core
from rlfw.models.settings import MODEL_DEFAULTS
from rlfw.registry import ALGOS, MODEL_SETTINGS, RUNNERS, SAMPLERS, AlgoSpec
from rlfw.runfolder.files import read_json_object
from rlfw.runners import RunSchedule
from rlfw.samplers.machinery.workers import DEFAULT_START_METHOD, default_workers
from rlfw.utils.checks import check_positive, check_seed
from rlfw.utils.settings import Flag

__all__ = [
    "RunConfig",
    "apply_overrides",
    "available_devices",
    "check_device",
    "config_keys",
    "env_family",
    "flatten",
    "preset",
    "schedule_for",
    "set_field",
]


def workers_or_auto(text: str) -> int | str:
    """``--n-workers``' value: a count, or 'auto' (tune_workers)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"takes a positive integer or 'auto', got {text!r}"
        ) from None


# Saved config keys that were renamed: old key -> (new key, value), or (None, _) to drop.
LEGACY_KEYS: dict[str, Callable[[Any], tuple[str | None, Any]]] = {
    "n_envs": lambda v: ("batch_B", v),
    # evaluate=False is now eval_every=None (saved after eval_every, so it wins)
    "schedule.evaluate": lambda v: (None, v) if v else ("schedule.eval_every", None),
    # r2d1's LSTM units became the run's one rnn_size (saved after it, so it wins)
    "r2d1.rnn_size": lambda v: ("rnn_size", v),
}


@dataclass(eq=False)  # __eq__ below: the algorithms' settings count too
class RunConfig:
    """Everything that defines a run; saved as ``config.json`` and rebuilt from it on resume."""

    algo: Annotated[str, Flag("--algo", choices=ALGOS.names)] = "ppo"
    """The algorithm: a registered name (rlfw's nine, or a plugin's); its preset for the
    env's family sets every flag left unset."""
    env: Annotated[str, Flag("--env")] = "CartPole-v1"
    """A gymnasium id (CartPole-v1, ALE/<Game>-v5 for Atari, MinAtar/<Game>-v1), or
    module:Class (--plugin module)."""
    sampler: Annotated[str, Flag("--sampler", choices=SAMPLERS.names)] = "serial"
    """How envs are stepped: serial, cpu (worker processes), gpu (workers step, the learner
    process infers), alternating, queue (GA3C), native (ale-py's threaded Atari)."""
    runner: Annotated[str, Flag("--runner", choices=RUNNERS.names)] = "sync"
    """How sampling and learning are composed: sync, concurrent (HTS-RL: policy lag
    exactly one, ppo/a2c) or async (a sampler process running ahead)."""
    async_lead: int = 2
    """Runner async: hand-offs its sampler may run ahead of the learner (with one batch per
    hand-off, a policy lag of ``async_lead - 1`` updates)."""
    async_handoff: int | None = None
    """Runner async: batches per hand-off between its sampler and the learner (one credit
    and one weight load each); default: 1 for on-policy learners, enough batches for 64
    env steps for replay learners (SAC's one-step batches)."""
    batch_B: Annotated[int, Flag("--batch-B", "--n-envs")] = 8
    """Envs stepped per batch: the B of [T, B]."""
    batch_T: Annotated[int, Flag("--batch-T")] = 32
    """Steps per env per batch: the T of [T, B]."""
    seed: Annotated[int, Flag("--seed")] = 0
    """The run's seed: env seeds, action sampling and the network's initial weights."""
    model: Annotated[str, Flag("--model", choices={m: m for m in MODELS})] = MODEL_DEFAULTS.model
    """The network: 'mlp', 'cnn', or 'auto' (a CNN sized to uint8 images, else an MLP)."""
    hidden: tuple[int, ...] = MODEL_DEFAULTS.hidden
    """Widths of the MLP's hidden layers (empty: none)."""
    activation: str = MODEL_DEFAULTS.activation
    """Activation of the MLP's hidden layers: 'tanh' or 'relu'."""
    log_std_init: float = MODEL_DEFAULTS.log_std_init
    """Gaussian policies: the initial log standard deviation."""
    ortho_init: bool = MODEL_DEFAULTS.ortho_init
    """MLP actor-critic: orthogonal initialization (false: PyTorch's default)."""
    sde_sample_freq: int = MODEL_DEFAULTS.sde_sample_freq
    """MLP, Box actions: gSDE exploration, its noise matrix resampled every this many env
    steps (0: plain Gaussian noise)."""
    recurrent: str | None = MODEL_DEFAULTS.recurrent
    """ppo/a2c: an 'lstm' or 'gru' core between the torso and the heads (none: feed-forward)."""
    rnn_size: int = MODEL_DEFAULTS.rnn_size
    """Units of the recurrent core: ppo's and a2c's (with recurrent), r2d1's LSTM."""
    rnn_critic: bool = MODEL_DEFAULTS.rnn_critic
    """Recurrent agents: the value head gets its own features and core."""
    device: Annotated[str, Flag("--device")] = MODEL_DEFAULTS.device
    """The torch device of the learner's model ('cpu', 'cuda', 'cuda:1')."""
    normalize_obs: bool = MODEL_DEFAULTS.normalize_obs
    """ppo/a2c/sac/td3/ddpg: normalize observations by their running mean and std."""
    obs_clip: float = MODEL_DEFAULTS.obs_clip
    """Normalized observations are clipped to ±this."""
    obs_norm_update: str = MODEL_DEFAULTS.obs_norm_update
    """When the observation statistics update: once per 'batch', or at every env 'step'."""
    n_eval_envs: int = 4
    """Envs that evaluation episodes are spread over."""
    n_eval_workers: int | None = None
    """Evaluation env processes (none: one per usable core on Atari, else 0)."""
    n_workers: Annotated[
        int | None,
        Flag(
            "--n-workers",
            parse=workers_or_auto,
            help="Worker processes of parallel samplers (default: the usable cores), or "
            "'auto': hill-climb on measured env steps/s before training and save the "
            "choice in config.json.",
        ),
    ] = None
    """Worker processes of the parallel samplers (none: the usable cores)."""
    tune_workers: bool = False
    """Pick n_workers by measured env steps/s before training (--n-workers auto, GA3C)."""
    tune_seconds: float = 2.0
    """Measuring time per worker count tried by tune_workers."""
    pin_cpus: Annotated[bool, Flag("--pin-cpus", const=True)] = False
    """Pin the learner and each sampler worker to its cores in the affinity plan (printed at
    start, saved as affinity.json)."""
    torch_threads: int | None = None
    """Torch threads of the learner process (none: one for a network under a million
    parameters, else the affinity plan's or the caller's). Set by the configuration and
    the network, never by the load, since the count can change a run's bits."""
    start_method: str = DEFAULT_START_METHOD
    """How worker processes start: 'forkserver', 'spawn' or 'fork'."""
    world_size: int = 1
    """Learner ranks: torchrun's, recorded here (not chosen)."""
    plugins: tuple[str, ...] = ()
    """Modules the run imports first (--plugin), recorded so a resume can name them."""
    schedule: RunSchedule = field(default_factory=lambda: RunSchedule(n_steps=120_000))
    """How long to train; when to evaluate, log and checkpoint."""
    atari: AtariOptions = field(default_factory=AtariOptions)
    """Preprocessing of ALE/<Game>-v5 envs."""
    env_options: EnvOptions = field(default_factory=EnvOptions)
    """How any env's observations are shaped before rlfw sees them."""
    wandb: WandbOptions = field(default_factory=WandbOptions)
    """Logging to Weights & Biases."""

    def __post_init__(self) -> None:
        # Every registered algorithm's settings, each under its name (``config.ppo``,
        # ``config.sac``, a plugin's), as config.json keeps them: declared by the
        # algorithm's spec, not here, so a new algorithm adds no field.
        for spec in ALGOS:
            vars(self).setdefault(spec.name, spec.config_cls())

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, RunConfig)
            and asdict(self) == asdict(other)
            and self.algo_configs() == other.algo_configs()
        )

    def _check_async_settings(self) -> None:
        """The async runner's own settings, set only for it (``async_lead`` is checked
        positive with the sizes)."""
        if self.async_lead != RunConfig.async_lead and self.runner != "async":  # not the default
            raise ValueError(
                f"async_lead={self.async_lead} is for runner 'async' (the hand-offs "
                f"its sampler may run ahead); runner {self.runner!r} has none"
            )
        if self.async_handoff is not None:
            if self.runner != "async":
                raise ValueError(
                    f"async_handoff={self.async_handoff} is for runner 'async' (batches per "
                    f"hand-off to its sampler process); runner {self.runner!r} has none"
                )
            check_positive(async_handoff=self.async_handoff)

    def validate(self) -> None:
        """Every check that can fail before work starts, each naming the bad value."""
        algo = ALGOS.get(self.algo)
        sampler = SAMPLERS.get(self.sampler)
        RUNNERS.get(self.runner).cls.check_algo(algo.algo_cls, self.algo)
        if self.tune_workers and not sampler.has_workers:
            raise ValueError(
                f"n_workers 'auto' with sampler {self.sampler!r} cannot work: it "
                f"has no workers; use sampler {_either(_with_workers())}"
            )
        if self.tune_workers and self.world_size > 1:
            raise ValueError(
                "n_workers 'auto' in a multi-rank run is not supported: ranks "
                "would tune apart; tune with one rank, then pass --n-workers N"
            )
        if self.tune_workers and not self.tune_seconds > 0:
            raise ValueError(f"tune_seconds must be > 0, got {self.tune_seconds!r}")
        if RUNNERS.get(self.runner).cls.shares_replay:  # the algorithm's rule for that
            getattr(self.algo_config(), "check_shared_replay", lambda: None)()
        check_positive(
            batch_B=self.batch_B,
            batch_T=self.batch_T,
            n_eval_envs=self.n_eval_envs,
            world_size=self.world_size,
            async_lead=self.async_lead,
        )
        check_seed(self.seed)
        check_model(self.model)
        for width in self.hidden:
            if isinstance(width, bool) or not isinstance(width, int) or width <= 0:
                raise ValueError(
                    f"hidden must list positive layer widths (or be empty: no "
                    f"hidden layer), got {list(self.hidden)}"
                )
        self._check_async_settings()
        if self.normalize_obs and not getattr(
            algo.algo_cls, "accepts_normalize_obs", not algo.uses_replay
        ):
            raise ValueError(
                f"normalize_obs is for ppo, a2c, sac, td3 and ddpg; "
                f"{self.algo} learns from raw observations: set "
                "normalize_obs=false"
            )
        self._check_recurrent(algo)
        if not self.obs_clip > 0:
            raise ValueError(f"obs_clip must be > 0, got {self.obs_clip!r}")
        self._check_obs_norm_update(sampler.cls)
        if self.n_workers is not None:
            check_positive(n_workers=self.n_workers)
        if self.torch_threads is not None:
            check_positive(torch_threads=self.torch_threads)
        self.schedule.validate()
        if self.schedule.video_every is not None:
            imageio_module()  # the install hint now, not at the first video
        if self.wandb.enabled:
            wandb_module()
        self.algo_config().validate()
        self._check_learning_starts()
        self.env_factory().validate()
        if sampler.runs_env is not None and not sampler.runs_env(self.env):
            others = [s.name for s in SAMPLERS if s.runs_env is None]
            raise ValueError(
                f"sampler {self.sampler!r} runs {sampler.env_note}, got env "
                f"{self.env!r}; use {_either(others)}"
            )
        check_device(self.device)

    def _check_learning_starts(self) -> None:
        """A replay algorithm's first update must fall inside the run."""
        starts = getattr(self.algo_config(), "learning_starts", None)
        if starts is not None and starts >= self.schedule.n_steps:
            raise ValueError(
                f"{self.algo}.learning_starts={starts} is not below the run of "
                f"{self.schedule.n_steps} env steps: it would never update; lower it or "
                "lengthen the run (--steps)"
            )

    def _check_recurrent(self, algo: AlgoSpec) -> None:
        """The recurrent core's fields (``recurrent``, ``rnn_size``, ``rnn_critic``) against
        the algorithm."""
        check_positive(rnn_size=self.rnn_size)
        if self.recurrent is not None:
            check_core(self.recurrent)
            if algo.uses_replay:
                # its agent reads rnn_size without recurrent: recurrent by itself
                spaces = EnvSpaces.of(self.env_factory().resolved())
                own = (
                    f"{self.algo} has no recurrent agent (r2d1 is the recurrent Q-learner)"
                    if "rnn_size" in algo.unread_model_settings(self, spaces)
                    else f"{self.algo} is recurrent by itself (its LSTM: rnn_size)"
                )
                raise ValueError(
                    f"recurrent={self.recurrent!r} is for ppo and a2c; {own}: set recurrent=none"
                )
            if getattr(self.algo_config(), "compile", None):
                raise ValueError(
                    f"{self.algo}.compile=true is not supported with "
                    f"recurrent={self.recurrent!r}; use compile=false or auto"
                )

    def _check_obs_norm_update(self, sampler_cls: type) -> None:
        if self.obs_norm_update not in OBS_NORM_UPDATES:
            raise ValueError(
                f"obs_norm_update must be one of {OBS_NORM_UPDATES}, got {self.obs_norm_update!r}"
            )
        if self.obs_norm_update != "step":
            return
        if not self.normalize_obs:
            raise ValueError(
                "obs_norm_update='step' needs normalize_obs=true (there are no "
                "observation statistics to update)"
            )
        # the rules live with the sampler and runner kinds (a user-registered sampler that
        # is not a SamplerBase declares nothing: it is taken not to see whole rows)
        check = getattr(sampler_cls, "check_per_step_statistics", None)
        if check is None:
            raise ValueError(
                f"sampler {self.sampler!r} cannot update per-step observation "
                "statistics (it declares no check_per_step_statistics); use "
                "obs_norm_update='batch'"
            )
        check(self.sampler)
        RUNNERS.get(self.runner).cls.check_per_step_statistics(self.world_size, self.runner)

    @classmethod
    def for_env(
        cls, env: str, algo: str = "ppo", steps: int | None = None, **overrides: Any
    ) -> "RunConfig":
        """The run ``rlfw train --env ENV --algo ALGO [--steps N]`` builds: the preset for
        the algorithm and env family, the run length (with its evaluation cadence), then
        ``overrides`` (fields, or groups as dicts: ``ppo={"epochs": 4}``). Scripts and the
        CLI build runs this one way."""
        ALGOS.get(algo)
        config = apply_overrides(cls(algo=algo, env=env), preset(algo, env))
        if steps is not None:
            apply_overrides(config, {"schedule": schedule_for(steps)})
        apply_overrides(config, overrides)
        for key, _ in flatten(overrides):  # once all are in: `sampler=` reads `n_workers=`
            check_read_key(config, key)
        if "batch_B" not in overrides:
            config.fit_batch_to_agents()
        return config

    def fit_batch_to_agents(self) -> None:
        """A many-agent env's ``batch_B`` as its family's preset means it: so many envs of
        this env's agents, counted again once the env's own arguments are in (MPE's ``N``
        changes how many agents there are). Other envs' is left as it is."""
        if env_family(self.env) == "multiagent":
            self.batch_B = multiagent_batch(self.env_factory())

    def eval_worker_count(self) -> int:
        """Evaluation env processes: ``n_eval_workers``, or by default one per usable core
        (up to the eval envs) on Atari, whose envs cost more than a pipe round trip, and
        none elsewhere (CartPole's do not)."""
        if self.n_eval_workers is not None:
            return self.n_eval_workers
        return default_workers(self.n_eval_envs) if is_atari(self.env) else 0

    def starts_processes(self) -> bool:
        """Whether this run starts processes with ``start_method``: the sampler's workers,
        the async runner's sampler process, or evaluation workers."""
        return (
            "start_method" in SAMPLERS.get(self.sampler).options(self, None)
            or "start_method" in RUNNERS.get(self.runner).cls.config_fields.values()
            or self.eval_worker_count() > 0
        )

    def algo_config(self, name: str | None = None) -> Any:
        """The settings of algorithm ``name`` (default: the run's, ``algo``): its config
        dataclass, as registered (``ALGOS.get(name).config_cls``)."""
        name = self.algo if name is None else name
        spec = ALGOS.get(name)
        # an algorithm registered after this config was made (a plugin imported later)
        return vars(self).setdefault(name, spec.config_cls())

    def algo_configs(self) -> dict[str, Any]:
        """Every registered algorithm's settings, by name."""
        return {spec.name: self.algo_config(spec.name) for spec in ALGOS}

    def replaced(self, **changes: Any) -> "RunConfig":
        """A copy with ``changes`` (keeps registered algorithms' configs, which
        ``dataclasses.replace`` would drop)."""
        out = copy.copy(self)
        for key, value in changes.items():
            setattr(out, key, value)
        return out

    def env_factory(self) -> EnvFactory:
        return EnvFactory(
            self.env, atari=self.atari, options=self.env_options, plugins=self.plugins
        )

    def to_dict(self) -> dict[str, Any]:
        """The run's settings as plain data (``config.json``): its fields, then its
        algorithm's settings under the algorithm's name (the others' it never reads)."""
        return {**asdict(self), self.algo: asdict(self.algo_config())}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunConfig":
        """Rebuild from ``to_dict`` output (a saved ``config.json``); every value is checked
        against its field's type, unknown keys are errors."""
        config = cls()
        for key, value in flatten(data):
            if key in LEGACY_KEYS:  # run folders written before a rename
                renamed, value = LEGACY_KEYS[key](value)
                if renamed is None:
                    continue
                key = renamed
            set_field(config, key, value)
        return config

    @classmethod
    def load(cls, run_dir: str) -> "RunConfig":
        path = os.path.join(run_dir, "config.json")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{run_dir!r} is not a run folder: no config.json in it")
        return cls.from_dict(read_json_object(path, "config file"))


def apply_overrides(config: RunConfig, overrides: dict[str, Any]) -> RunConfig:
    """Set top-level fields and nested ones (``{'ppo': {...}}``) from a plain dict, each
    value checked against its field's type."""
    for key, value in flatten(overrides):
        set_field(config, key, value)
    return config


def changed_from_preset(config: RunConfig) -> dict[str, Any]:
    """The dotted settings where ``config`` differs from the run that ``rlfw train --algo
    --env --steps --seed --sampler --runner`` builds with today's presets: the ``--set``
    flags that rebuild it (a report's command must name them, and a preset that changed
    since the run shows up here too)."""
    reference = RunConfig.for_env(
        config.env,
        config.algo,
        steps=config.schedule.n_steps,
        seed=config.seed,
        sampler=config.sampler,
        runner=config.runner,
    )
    ours, theirs = flatten(config.to_dict()), dict(flatten(reference.to_dict()))
    return {key: value for key, value in ours if key not in theirs or theirs[key] != value}


def train_command(config: RunConfig) -> str:
    """The ``rlfw train`` command line that builds ``config`` with today's presets."""
    changes = "".join(
        f" --set {set_argument(key, value)}" for key, value in changed_from_preset(config).items()
    )
    return (
        f"rlfw train --algo {config.algo} --env {config.env} --sampler {config.sampler} "
        f"--runner {config.runner} --steps {config.schedule.n_steps} --seed {config.seed}"
        f"{changes}"
    )


def set_argument(key: str, value: Any) -> str:
    """``key=value`` as ``--set`` parses it back (tuples comma-joined, None as none)."""
    if value is None:
        text = "none"
    elif isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, (list, tuple)):
        text = ",".join(map(str, value))
    else:
        text = str(value)
    return f"{key}={text}"


def flatten(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``{'ppo': {'epochs': 4}}`` -> ``[('ppo.epochs', 4)]``."""
    out = []
    for key, value in data.items():
        if isinstance(value, dict):
            out += flatten(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def config_keys(obj: Any = None, prefix: str = "") -> list[str]:
    """Every settable dotted key of a run config, e.g. ``ppo.epochs``."""
    obj = RunConfig() if obj is None else obj
    keys = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            keys += config_keys(value, f"{prefix}{f.name}.")
        else:
            keys.append(f"{prefix}{f.name}")
    if isinstance(obj, RunConfig):
        for name, settings in obj.algo_configs().items():
            keys += config_keys(settings, f"{prefix}{name}.")
    return keys


def set_field(config: RunConfig, key: str, value: Any) -> None:
    """Set dotted ``key`` (``seed``, ``ppo.epochs``) to ``value`` (a Python value, or text
    as given to ``--set``), converted to the field's declared type; ``ValueError`` naming
    the key and what is allowed otherwise."""
    parts = key.split(".")
    group = parts[0] if len(parts) == 2 else None
    if group is None:
        owner: Any = config
    else:
        owner = config.algo_config(group) if group in ALGOS else getattr(config, group, None)
    name = parts[-1]
    known = key in ALGOS or (dataclasses.is_dataclass(owner) and name in _field_names(owner))
    if len(parts) > 2 or not known:
        raise ValueError(_unknown_key(key))
    if key in ALGOS or dataclasses.is_dataclass(getattr(owner, name)):
        raise ValueError(
            f"config key {key!r} is a group; set one of its fields: "
            + ", ".join(k for k in config_keys() if k.startswith(key + "."))
        )
    converted = convert(key, value, typing.get_type_hints(type(owner))[name])
    if group is None:
        setattr(config, name, converted)
    else:  # replaced, not mutated: some groups (atari) are frozen
        setattr(config, group, dataclasses.replace(owner, **{name: converted}))


def check_read_key(config: RunConfig, key: str) -> None:
    """A user's setting ``key`` (``--set``, a script's overrides) must be one the run reads:
    a rainbow run never reads ``dqn.learning_starts``, nor a CartPole run ``atari.*``, so
    setting them would change nothing, silently. Saved configs hold every group; only what
    the user sets is checked."""
    group, _, name = key.partition(".")
    if key == "world_size":
        raise ValueError(
            "config key 'world_size' is recorded, not chosen: the ranks are "
            "torchrun's (torchrun --nproc-per-node N -m rlfw train ...), and a "
            "plain launch trains one"
        )
    if key in MODEL_SETTINGS:
        _check_model_setting_read(config, key)
    if key == "n_eval_workers" and (config.n_eval_workers or 0) > config.n_eval_envs:
        raise ValueError(
            f"n_eval_workers={config.n_eval_workers} exceeds n_eval_envs="
            f"{config.n_eval_envs}: each evaluation worker steps at least one "
            f"env, so this run would start only {config.n_eval_envs}"
        )
    if key == "n_workers" and not SAMPLERS.get(config.sampler).has_workers:
        raise ValueError(
            f"config key {key!r} is for samplers with worker processes "
            f"({_either(_with_workers())}); sampler {config.sampler!r} has none, "
            "so this run would ignore it"
        )
    if key == "start_method" and not config.starts_processes():
        raise ValueError(
            f"config key 'start_method' is how worker processes start, and this "
            f"run starts none (sampler {config.sampler!r}, runner "
            f"{config.runner!r}, no evaluation workers): it would ignore it"
        )
    if key == "tune_seconds" and not config.tune_workers:
        raise ValueError(
            "config key 'tune_seconds' is the trial length of tune_workers=true "
            "(--n-workers auto), which this run does not set: it would ignore it"
        )
    if key == "rnn_critic" and config.recurrent is None:
        raise ValueError(
            f"config key {key!r} shapes {config.algo}'s recurrent core, and this run "
            "has none (recurrent=none): set recurrent=lstm or gru too, or leave it"
        )
    if key == "obs_clip" and not config.normalize_obs:
        raise ValueError(
            "config key 'obs_clip' clips normalized observations, and this run "
            "has normalize_obs=false: it would ignore it"
        )
    if name and group == "atari" and not is_atari(config.env):
        raise ValueError(
            f"config key {key!r} is for Atari games (ALE/<Game>-v5), but this "
            f"run's env is {config.env!r}, which would ignore it"
        )
    switch = _READ_ONLY_WITH.get(name)
    if group == config.algo and switch and not getattr(config.algo_config(), switch, True):
        raise ValueError(
            f"config key {key!r} is read only with {group}.{switch}=true, which "
            "this run does not set: it would ignore it"
        )
    if not name or group == config.algo or group not in ALGOS:
        return
    own = f"{config.algo}.{name}"
    hint = (
        f"set {own} instead"
        if name in _field_names(config.algo_config())
        else f"algo {config.algo!r} has no {name!r}"
    )
    raise ValueError(
        f"config key {key!r} belongs to algo {group!r}, but this run trains "
        f"{config.algo!r} and would ignore it: {hint}"
    )


# An algorithm's field that is read only when another of its fields is on.
_READ_ONLY_WITH = {
    "priority_alpha": "prioritized",
    "priority_beta": "prioritized",
    "reward_clip": "normalize_reward",
}


def _check_model_setting_read(config: RunConfig, key: str) -> None:
    """``key`` (one of ``MODEL_SETTINGS``) must shape the network this algorithm builds for
    this env; whether it does depends on the env's spaces, so this makes one env to see."""
    spaces = EnvSpaces.of(config.env_factory().resolved())
    why = ALGOS.get(config.algo).unread_model_settings(config, spaces).get(key)
    if why:
        raise ValueError(
            f"config key {key!r} would be ignored by this run ({config.algo} on "
            f"{config.env}): {why}"
        )


def _field_names(obj: Any) -> set[str]:
    return {f.name for f in dataclasses.fields(obj)}


def _either(names: list[str] | tuple[str, ...]) -> str:
    """'a, b or c'."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _with_workers() -> list[str]:
    return [s.name for s in SAMPLERS if s.has_workers]


def _unknown_key(key: str) -> str:
    """The error for ``key``, listing the keys of its group when it names one (an
    algorithm's, ``schedule``...), so the line stays readable."""
    keys = config_keys()
    group = key.split(".", 1)[0]
    own = [k for k in keys if "." in key and k.startswith(f"{group}.")]
    if own:
        return f"unknown config key {key!r}; {group}'s keys: {', '.join(own)}"
    return f"unknown config key {key!r}; valid keys: {', '.join(keys)}"


_TRUE, _FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")


def convert(key: str, value: Any, hint: Any) -> Any:
    """``value`` as type ``hint`` (int, float, bool, str, X | None, tuple[int, ...])."""
    args = typing.get_args(hint)
    if type(None) in args:  # Optional[X]
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            return None
        (hint,) = [a for a in args if a is not type(None)]
        args = typing.get_args(hint)
    wrong = ValueError(f"config key {key!r} takes {_type_name(hint)}, got {value!r}")
    if typing.get_origin(hint) is tuple:
        if isinstance(value, str):
            value = [v for v in value.strip("()[] ").split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise wrong
        return tuple(convert(key, v, args[0]) for v in value)
    scalar = _SCALARS.get(hint)
    if scalar is None:
        raise wrong
    try:
        return scalar(value)
    except (TypeError, ValueError):
        raise wrong from None


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
        return value.lower() in _TRUE
    raise ValueError(value)


def _to_int(value: Any) -> int:
    if isinstance(value, bool):  # an int subclass, never meant as one
        raise ValueError(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return int(value.replace("_", ""))
    raise ValueError(value)


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(value)
    return float(value)


def _to_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(value)
    return value


_SCALARS = {bool: _to_bool, int: _to_int, float: _to_float, str: _to_str}


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is tuple:
        return f"a comma-separated list of {_type_name(typing.get_args(hint)[0])}"
    return {bool: "true or false", int: "an integer", float: "a number", str: "text"}.get(
        hint, str(hint)
    )


def check_device(device: str) -> None:
    """``ValueError`` naming ``device`` and what is available, before any work starts."""
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ValueError(
            f"device {device!r} is not a torch device; available: {', '.join(available_devices())}"
        ) from None
    if dev.type == "cpu":
        return
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if dev.index is None and count or (dev.index is not None and dev.index < count):
            return
        why = (
            "this torch build has no CUDA"
            if torch.version.cuda is None
            else f"{count} CUDA device(s) visible"
        )
        raise ValueError(
            f"device {device!r} is not available ({why}); available: "
            f"{', '.join(available_devices())}"
        )
    raise ValueError(
        f"device {device!r} is not supported; available: {', '.join(available_devices())}"
    )


def available_devices() -> list[str]:
    out = ["cpu"]
    if torch.cuda.is_available():
        out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return out
