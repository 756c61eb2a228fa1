"""Each command's own options, declared once as dataclass fields (the type, the default,
the flag, and the help written under each), from which ``rlfw.launch.flags.add_options``
makes the parser: the way CleanRL's ``Args`` dataclasses are the whole of its parsing.

A setting of the run itself is not declared here: it is a ``RunConfig`` field, and a
command that takes it adds that field's flag (``add_config_flags``). A group used by
several commands (``TrustOptions``, ``PolicyEvalOptions``, ``ManyRunsOptions``) is declared
once and added to each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from rlfw.utils.settings import Flag


@dataclass
class TrustOptions:
    """What a command may import or unpickle: only what its command line names."""

    plugin: Annotated[tuple[str, ...], Flag("--plugin", metavar="MODULE")] = ()
    """Import MODULE first, e.g. one that registers your envs, samplers or algorithms
    (repeatable). A run folder's config.json never imports a module by itself: a run that
    needs one names it, and you add it here."""
    trust_checkpoint: Annotated[bool, Flag("--trust-checkpoint", const=True)] = False
    """Load checkpoints holding pickled objects (written by rlfw before its safe format,
    or env state sealed by another user's key). Loading a pickle can run any code: only
    for run folders whose source you trust."""


@dataclass
class OverrideOptions:
    """Config keys set by name."""

    set: Annotated[tuple[str, ...], Flag("--set", metavar="KEY=VALUE")] = ()
    """Set any config key, typed from the config dataclasses (repeatable), e.g. --set
    ppo.gamma=0.95 --set atari.sticky_action_prob=0.25; an algorithm's keys under the
    run's own algo (rainbow.n_step for --algo rainbow), atari.* for ALE games only."""


@dataclass
class TrainOptions:
    """``rlfw train``'s own options (the run's settings are its config flags)."""

    config: Annotated[str | None, Flag("--config", metavar="FILE.json")] = None
    """Start from a saved config.json instead of the preset; flags and --set apply on
    top."""
    log_dir: Annotated[str | None, Flag("--log-dir")] = None
    """The run folder (default runs/<algo>-<env>-s<seed>-<time>)."""
    help_config: Annotated[bool, Flag("--help-config", const=True)] = False
    """List every config key of the run --algo and --env pick (type, default, preset
    value, help) and exit."""
    no_progress: Annotated[bool, Flag("--no-progress", const=True)] = False
    """Hide the progress bar."""
    callback: Annotated[tuple[str, ...], Flag("--callback", metavar="MODULE:NAME")] = ()
    """Observe the run with class NAME of MODULE, constructed without arguments
    (repeatable): any of on_start, on_iteration (False stops the run with a checkpoint),
    on_eval, on_checkpoint, on_end; see rlfw.runners.callbacks."""
    resume: Annotated[str | None, Flag("--resume", metavar="RUN_DIR")] = None
    """Continue the run in RUN_DIR from its newest checkpoint with its saved config
    (--steps and --max-restarts apply; a flag that contradicts the run is an error)."""


@dataclass
class PolicyEvalOptions:
    """Which checkpoint of a run to play, and how many episodes on which seed."""

    best: Annotated[bool, Flag("--best", const=True)] = False
    """Use checkpoints/best.pt (the highest evaluation mean) instead of the newest
    checkpoint."""
    episodes: Annotated[int, Flag("--episodes")] = 10
    """Evaluation episodes to play (export: the model card's)."""
    seed: Annotated[int, Flag("--seed")] = 12345
    """The evaluation seed (unlike any training seed)."""


@dataclass
class EvalOptions:
    """``rlfw eval``'s own options."""

    greedy: Annotated[
        bool | None,
        Flag(
            "--sampled",
            const=False,
            help="Sample actions (dqn: eval-ε-greedy); default: as the run evaluated.",
        ),
        Flag("--greedy", const=True, help="Greedy actions."),
    ] = None
    """Greedy actions (true), sampled ones (false), or as the run evaluated (none)."""
    video: Annotated[bool, Flag("--video", const=True)] = False
    """Play the episodes on one rendering env and write each as
    RUN_DIR/videos/episode-<k>-return-<R>.mp4 (the first also as a GIF; Atari: the
    full-colour screen). Extra [video]."""


@dataclass
class ExportOptions:
    """``rlfw export``'s own options."""

    gif: Annotated[bool, Flag("--no-gif", const=False)] = True
    """Leave out replay.gif (the flag); by default the folder has one when the [video]
    extra is installed."""
    onnx: Annotated[bool, Flag("--onnx", const=True)] = False
    """Also write policy.onnx: the deterministic policy for onnxruntime (extra [onnx]),
    checked at export against the agent on real observations."""


@dataclass
class BenchSamplerOptions:
    """``rlfw bench-sampler``'s own options (the sampler's are train's config flags)."""

    seconds: Annotated[float, Flag("--seconds")] = 10.0
    """The timed duration."""


@dataclass
class CheckEnvOptions:
    """``rlfw check-env``'s own options."""

    episodes: Annotated[int, Flag("--episodes")] = 3
    """Random episodes to play."""
    max_steps: Annotated[int, Flag("--max-steps")] = 1000
    """Steps at most per episode."""


@dataclass
class ManyRunsOptions:
    """How a command that runs many trainings (sweep, benchmark) runs them."""

    seeds: Annotated[tuple[int, ...] | None, Flag("--seeds", nargs="+")] = None
    """Seeds (default: sweep 0; benchmark the suite's, 0..N-1)."""
    max_parallel: Annotated[int, Flag("--max-parallel")] = 1
    """Runs at once (local: each pinned to its own slice of the cores)."""
    backend: Annotated[str, Flag("--backend", choices={"local": "local", "ray": "ray"})] = "local"
    """Local processes, or Ray tasks (extra [ray])."""
    ray_address: Annotated[str | None, Flag("--ray-address")] = None
    """The Ray cluster to join ('auto', 'ray://head:10001'); default: start a local Ray
    instance."""


@dataclass
class SweepOptions:
    """``rlfw sweep``'s own options."""

    runs_dir: Annotated[str, Flag("--runs-dir")]
    """The folder for the variants' run folders."""
    grid: Annotated[tuple[str, ...], Flag("--grid", metavar="KEY=V1,V2")] = ()
    """A config key and its values (repeatable; the grid is their product), e.g. --grid
    ppo.epochs=4,10 --grid batch_B=8,32."""
    cpus_per_run: Annotated[float | None, Flag("--cpus-per-run")] = None
    """Ray: CPUs each variant reserves (default 1)."""


@dataclass
class TuneOptions:
    """``rlfw tune``'s own options (the algorithm and env are train's flags)."""

    trials: Annotated[int, Flag("--trials")] = 20
    """Trials the study ends with (complete or pruned; an interrupted one is retried)."""
    steps: Annotated[int, Flag("--steps", metavar="N")] = 50_000
    """Env steps of each trial's run."""
    jobs: Annotated[int, Flag("--jobs")] = 1
    """Worker processes on this machine, one torch thread each."""
    storage: Annotated[str | None, Flag("--storage", metavar="URL")] = None
    """The Optuna database (postgresql://..., mysql://...): workers anywhere that name it
    share the study. Default: SQLite in the study folder."""
    study: Annotated[str | None, Flag("--study", metavar="DIR")] = None
    """The study folder: its trials' run folders, database, report and plots (default
    studies/<algo>-<env>)."""
    space: Annotated[tuple[str, ...], Flag("--space", metavar="KEY=RANGE")] = ()
    """Replace or add a searched setting (repeatable): KEY=LOW:HIGH[:log][:int] or
    KEY=A,B,C, e.g. --space ppo.learning_rate=1e-5:1e-2:log --space ppo.epochs=4,10."""
    evaluations: Annotated[int, Flag("--evaluations")] = 5
    """Evaluations per trial: the pruner's curve; the last one is the objective."""
    eval_episodes: Annotated[int, Flag("--eval-episodes")] = 10
    """Episodes per evaluation."""
    seed: Annotated[int, Flag("--seed")] = 0
    """The TPE sampler's seed; trial k's run has seed + k."""


@dataclass
class BenchmarkOptions:
    """``rlfw benchmark``'s own options."""

    suite: Annotated[str, Flag("--suite")]
    """The suite to run (the command's description lists them)."""
    peer: Annotated[str | None, Flag("--peer", choices={"sb3": "sb3"})] = None
    """Also run stable-baselines3 with rl-baselines3-zoo's settings."""
    out: Annotated[str | None, Flag("--out")] = None
    """The report and run folders (default docs/benchmarks/SUITE)."""
    report_only: Annotated[bool, Flag("--report-only", const=True)] = False
    """Run nothing: write the report from the runs finished so far."""
    entries: Annotated[tuple[str, ...] | None, Flag("--entries", nargs="+", metavar="ENTRY")] = None
    """Run only these entries (as the report names them: a2c-CartPole-v1,
    ppo-MinAtar_Breakout-v1); the report still covers the whole suite, the other entries
    from their finished runs."""
