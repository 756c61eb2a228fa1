"""How long a run trains and how often it evaluates, logs and checkpoints; what it returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from rlfw.samplers.machinery.evaluation import EvalLimits
from rlfw.utils.checks import check_positive
from rlfw.utils.settings import Flag


@dataclass
class RunSchedule:
    """How long to train and how often to evaluate, log and checkpoint (in env steps).

    ``eval_every=None`` turns evaluation off (throughput runs). Evaluation is bounded by
    ``eval_max_episode_steps`` per episode and ``eval_max_steps`` per evaluation (agent
    steps; None: unbounded); episodes cut by them are logged as ``eval/episodes_cut``."""

    n_steps: Annotated[
        int,
        Flag(
            "--steps",
            metavar="N",
            help="Total env steps (the preset's: 120k, Atari 10M), with an evaluation "
            "cadence to match; with --resume, extends the run to this many.",
        ),
    ]
    """Env steps to train for, over all envs (and ranks); --steps sets it with its
    evaluation cadence."""
    eval_every: Annotated[int | None, Flag("--eval-every")] = 10_000
    """Env steps between evaluations (none: no evaluation)."""
    eval_episodes: Annotated[int, Flag("--eval-episodes")] = 10
    """Episodes per evaluation."""
    eval_greedy: Annotated[
        bool,
        Flag("--eval-greedy", const=True),
        Flag(
            "--eval-sampled",
            const=False,
            help="Evaluate with sampled actions (dqn: eval-ε-greedy).",
        ),
    ] = True
    """Evaluate with greedy actions (false: sampled; dqn: eval-ε-greedy, the Atari
    preset's)."""
    eval_max_episode_steps: int | None = None
    """Agent steps after which an evaluation episode is cut (none: unbounded)."""
    eval_max_steps: int | None = None
    """Agent steps after which a whole evaluation is cut (none: unbounded)."""
    log_every: int = 10_000
    """Env steps between rows of progress.csv, TensorBoard and the console."""
    checkpoint_every: Annotated[int, Flag("--checkpoint-every")] = 50_000
    """Env steps between checkpoints (one is always written at the end)."""
    keep_checkpoints: Annotated[int, Flag("--keep-checkpoints")] = 3
    """Newest checkpoints kept (best.pt is kept apart)."""
    stop_at_return: Annotated[float | None, Flag("--stop-at-return")] = None
    """Stop early once an evaluation's mean return reaches this."""
    max_restarts: Annotated[int, Flag("--max-restarts")] = 0
    """Restart a sampler whose worker died from the newest checkpoint, up to this many
    times (0, as torchrun's default)."""
    video_every: Annotated[int | None, Flag("--video-every", metavar="STEPS")] = None
    """At the first evaluation past every this many env steps, a video of one evaluation
    episode in RUN/videos/ (extra [video]; none: off)."""

    def validate(self) -> None:
        check_positive(
            n_steps=self.n_steps,
            eval_episodes=self.eval_episodes,
            log_every=self.log_every,
            checkpoint_every=self.checkpoint_every,
            keep_checkpoints=self.keep_checkpoints,
        )
        if self.eval_every is not None:
            check_positive(eval_every=self.eval_every)
        if self.video_every is not None:
            check_positive(video_every=self.video_every)
        # both act at evaluations: with evaluation off they would never act
        for name, what in (("video_every", "records"), ("stop_at_return", "is checked")):
            if getattr(self, name) is not None and self.eval_every is None:
                raise ValueError(
                    f"{name} {what} at evaluations, and eval_every is None "
                    f"(evaluation off): set eval_every, or {name}=none"
                )
        self.eval_limits().validate()
        if (
            isinstance(self.max_restarts, bool)
            or not isinstance(self.max_restarts, int)
            or self.max_restarts < 0
        ):
            raise ValueError(f"max_restarts must be an integer >= 0, got {self.max_restarts!r}")

    def eval_limits(self) -> EvalLimits:
        return EvalLimits(self.eval_max_episode_steps, self.eval_max_steps)


@dataclass
class TrainResult:
    env_steps: int
    iterations: int
    eval_return: float | None = None  # mean of the last evaluation; None: none yet
    best_eval_return: float | None = None
    eval_history: list[tuple[int, float]] = field(default_factory=list)
    interrupted: bool = False
    restarts: int = 0
    stopped_by: str | None = None  # the callback that stopped the run, if one did

    def evals(self) -> str:
        """'last eval return R, best B', or 'no evaluation yet' (e.g. Ctrl-C before the
        first one): for the line a script prints at the end."""
        if self.eval_return is None:
            return "no evaluation yet"
        return f"last eval return {self.eval_return:.2f}, best {self.best_eval_return:.2f}"


def iterations_per(steps: int, per_itr: int) -> int:
    """A cadence in env steps as a whole number of iterations (at least one)."""
    return max(1, round(steps / per_itr))
