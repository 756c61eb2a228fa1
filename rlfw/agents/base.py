"""What samplers call on every agent and algorithms share (the ``Agent`` protocol), the
record a step returns (``AgentStep``), ``ModelAgent``, which implements the mode and
weight parts for any agent whose parameters live in ``self.model``, and
``invariant_rows``, which makes a sampling-time forward pass give each row the same bits
however many rows one call has."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import (
    Any,
    Callable,
    Iterator,
    Mapping,
    NamedTuple,
    Optional,
    Protocol,
    Sequence,
    TypeVar,
    Union,
    cast,
    runtime_checkable,
)

import numpy as np
import torch
from torch import nn

from rlfw.buffers.samples import StepInfo
from rlfw.buffers.tree import Tree, tree_leaves, tree_map, tree_to
from rlfw.models.normalize import NormalizedModel


class AgentStep(NamedTuple):
    """One batched ``Agent.step``: the actions (buffer form), the per-step info kept in
    ``Samples.agent_info`` (``AgentInfo`` for actor-critics, ``QInfo`` for Q-agents) and the
    recurrent state after the step (``None`` for a feed-forward agent)."""

    action: torch.Tensor
    info: StepInfo
    state: torch.Tensor | None = None


Observation = Union[
    np.ndarray, torch.Tensor, Mapping[str, "Observation"], tuple["Observation", ...]
]
"""What ``step`` and ``value`` take for ``n`` env slots: an array or tensor ``[n, *obs]``,
or, for a ``Dict`` / ``Tuple`` observation space, a dict / tuple tree of them (a buffer's
observation subtree, ``rlfw.buffers.tree``)."""

AgentState = Optional[torch.Tensor]
"""A recurrent agent's state for ``n`` env slots: one flat ``[n, state_size]`` tensor (what
the core keeps, e.g. an LSTM's ``h`` and ``c`` side by side); ``None`` for a feed-forward
agent. Samplers hold one per slot and never look inside."""


def reset_states(state: AgentState, done: np.ndarray | torch.Tensor) -> None:
    """Zero, in place, the states of the rows whose episode ended (``done [n]``): the next
    step of those slots starts a new episode from the initial state."""
    if state is not None:
        done = torch.as_tensor(done, device=state.device)
        if done.any():
            state[done] = 0


# A sampling-time forward pass runs on a multiple of this many rows, on one intra-op
# thread (``invariant_rows``). Measured on torch 2.13+cpu (MKL 2024.2, oneDNN 3.12,
# AVX-512), one thread: MKL's sgemm (every Linear, LSTM/GRU cell product) gives a row other
# bits in a call of fewer than 4 rows; its sgemv (a Linear to one output: the value head)
# computes the last (rows mod 4) rows of a call apart; oneDNN's convolution gives other
# bits to a 1-row call. In calls of any multiple of 4 rows (4 to 1024 tried) every row got
# the same bits. With more threads MKL splits a call's rows among them, and each share
# rounds as a call of its size would (2 threads: 5, 6, 7, 9, 10, 11 rows differ), so the
# pass runs on one thread, as every worker and the gpu, queue and native samplers'
# inference already do. Padding costs at most 3 rows of compute, only in calls whose row
# count is not a multiple of 4. Cutting every call into chunks of exactly k rows would not
# rest on that measurement, but its extra calls cost 2-15x for 64 rows (k = 4 to 16, MLP
# and MinAtar CNN, measured); with oneDNN disabled, torch's own convolution gave other bits
# in calls of 1 to 8 rows than in one of 64, and the products after it still need the
# padding.
ROW_BLOCK = 4
# ... and on at least this many: on a Xeon with AMX (2026-12-07, the same torch), MKL's
# sgemm gave a row other bits in every call of 1 to 10 rows than in a call of 256, the
# multiples of 4 up to 8 included; from 11 rows on every row count agreed. A call of fewer
# rows (a single env, a small worker share) computes 16: a few rows more of a small MLP,
# up to 16x one row of a CNN.
MIN_ROWS = 16

R = TypeVar("R")


@contextmanager
def _one_thread() -> Iterator[None]:
    """One torch intra-op thread for a block, the caller's count restored after it; left
    as it is off the main thread (the concurrent runner's sampling thread), where the
    count, global to the process, would change under the learner's ops mid-update."""
    before = torch.get_num_threads()
    if before == 1 or threading.current_thread() is not threading.main_thread():
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def pad_rows(tree: Tree, extra: int) -> Tree:
    """Each tensor leaf ``[n, ...]`` with its last row repeated ``extra`` more times: real
    rows keep any leaf valid (a code in range, a mask with a valid action)."""
    return tree_map(lambda x: torch.cat([x, x[-1:].expand(extra, *x.shape[1:])]), tree)


def invariant_rows(forward: Callable[..., R], *rows: Tree, pad: bool = True) -> R:
    """``forward(*rows)`` with each row's result independent of how many rows there are:
    the trees of tensors ``rows`` (leading dim ``n``; None allowed) padded to a multiple
    of ``ROW_BLOCK`` rows and at least ``MIN_ROWS``, run on one thread, every output tensor
    cut back to ``n`` rows.
    What samplers record then has the same bits whichever sampler (serial, workers with
    a share of the slots, groups, a queue's batches) made the call. ``pad=False`` (greedy
    evaluation, whose envs every sampler steps in one place with the same calls) runs the
    rows as given, on one thread: a 1-env evaluation of a CNN then costs one row, not 16."""
    leaves = tree_leaves(rows[0])
    n = int(leaves[0].shape[0]) if leaves else 0
    extra = max(n + -n % ROW_BLOCK, MIN_ROWS) - n if n and pad else 0
    with _one_thread():
        if not extra:
            return forward(*rows)
        out = forward(*(pad_rows(tree, extra) for tree in rows))
    return cast(R, tree_map(lambda x: x[:n], out))


@runtime_checkable
class Agent(Protocol):
    """What every sampler calls on an agent, and the part every algorithm shares.

    Each algorithm also calls its agent kind's own training methods:
    ``ActorCriticAgent.evaluate_actions`` (PPO, A2C), ``DqnAgent.q`` and ``set_epsilon``
    (DQN).

    Sampling: ``step(obs, noise, slots, state)`` returns actions drawn from ``noise``, the
    slots' own random numbers of shape ``[n, *noise_shape]`` (``noise_kind`` 'uniform' or
    'normal'), so actions never depend on which process stepped which slot; a fresh draw
    serves ``noise_hold`` consecutive steps (1 for all but gSDE's noise matrix); ``value(obs,
    state)`` bootstraps truncated episodes and batch ends; ``env_action`` turns buffer
    actions into what ``env.step`` takes. Recurrent state: ``initial_state(n)`` is the state
    of ``n`` slots at an episode start (``None``: feed-forward); a sampler passes each
    slot's state into ``step``, keeps the ``AgentStep.state`` it returns and zeroes a slot's
    (``reset_states``) when its episode ends. One contract for both kinds: a feed-forward
    agent takes and returns ``None``. Modes: ``sample_mode`` (collecting), ``eval_mode`` (greedy),
    ``train_mode`` (optimizer passes); ``greedy`` tells which. Weights: ``state_dict`` /
    ``load_state_dict`` are what checkpoints hold and what parallel samplers ship to workers;
    ``parameters`` is what the optimizer updates. Per-step observation statistics: an agent
    with ``per_step_statistics`` must be shown each training step's full ``[B]`` row, in
    slot order, through ``observe`` before ``step`` acts on it; samplers that never hold a
    full row refuse such an agent. Final observations: an agent with a true
    ``keeps_final_observation`` attribute (optional, read with ``getattr``) gets truncated
    steps' final observations stored in the batch instead of their bootstrap values.
    """

    # set by samplers (evaluation acts greedily, then restores it)
    greedy: bool

    # read-only: an agent may compute these (properties) or hold them as attributes
    @property
    def noise_shape(self) -> tuple[int, ...]: ...

    @property
    def noise_kind(self) -> str: ...

    @property
    def noise_hold(self) -> int: ...

    @property
    def per_step_statistics(self) -> bool: ...

    def observe(self, observation: Observation) -> None: ...

    def initial_state(self, n: int) -> AgentState: ...

    def step(
        self,
        obs: Observation,
        noise: np.ndarray | torch.Tensor,
        slots: Sequence[int] | None = None,
        state: AgentState = None,
    ) -> AgentStep: ...

    def value(self, obs: Observation, state: AgentState = None) -> torch.Tensor: ...

    def env_action(self, action: torch.Tensor) -> np.ndarray: ...

    def sample_mode(self) -> None: ...

    def eval_mode(self) -> None: ...

    def train_mode(self) -> None: ...

    def parameters(self) -> Iterator[nn.Parameter]: ...

    def state_dict(self) -> dict[str, torch.Tensor]: ...

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None: ...


# Modules whose forward is the same in train and eval mode (their children are checked
# on their own); activations are all of torch.nn.modules.activation.
_MODELESS = (
    nn.Linear,
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.Sequential,
    nn.ModuleList,
    nn.ModuleDict,
    nn.Flatten,
    nn.Unflatten,
    nn.Identity,
    nn.LayerNorm,
    nn.Embedding,
)


def modes_matter(model: nn.Module) -> bool:
    """Whether ``model.train()`` / ``.eval()`` can change what it computes: True if any
    module is dropout, a batch or instance norm, a recurrent layer (dropout, cuDNN's
    training flag), or of a class neither torch's modeless ones nor rlfw's (none of rlfw's
    modules reads ``self.training``; a user's may)."""
    for module in model.modules():
        kind = type(module)
        if isinstance(module, (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._NormBase)):
            return True
        if isinstance(module, nn.RNNBase):
            return True
        if isinstance(module, _MODELESS) or kind.__module__ == "torch.nn.modules.activation":
            continue
        if kind.__module__.startswith("rlfw."):
            continue
        return True
    return False


class ModelAgent:
    """Modes, weights and initial state of ``self.model`` for the ``Agent`` protocol;
    subclasses add ``step``, ``value``, ``env_action`` and the noise description. The model
    is recurrent when it has a ``state_size`` > 0."""

    model: nn.Module
    greedy: bool = False
    noise_hold: int = 1
    device: torch.device = torch.device("cpu")

    def _obs(self, obs: Observation) -> Any:
        """Observations (an array, or a dict/tuple tree of them) as tensors on the device."""
        if isinstance(obs, (np.ndarray, torch.Tensor)):
            return torch.as_tensor(obs, device=self.device)
        return tree_to(obs, self.device)

    @property
    def state_size(self) -> int:
        return int(getattr(self.model, "state_size", 0))

    def initial_state(self, n: int) -> AgentState:
        size = self.state_size
        if size == 0:
            return None
        device = next(self.model.parameters()).device
        return torch.zeros(n, size, device=device)

    def sample_mode(self) -> None:
        self.greedy = False
        self._set_training(False)

    def eval_mode(self) -> None:
        self.greedy = True
        self._set_training(False)

    def train_mode(self) -> None:
        self.greedy = False
        self._set_training(True)

    def _set_training(self, training: bool) -> None:
        if self.model.training == training:
            return
        # Walking every submodule twice a batch is ~5% of A2C CartPole's time: skipped for
        # a model none of whose modules behaves differently in the two modes.
        matters = self.__dict__.get("_modes_matter")
        if matters is None:
            matters = self._modes_matter = modes_matter(self.model)
        if matters:
            self.model.train(training)

    def parameters(self) -> Iterator[nn.Parameter]:
        return self.model.parameters()

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.model.state_dict()

    @property
    def per_step_statistics(self) -> bool:
        """True when the model's observation statistics are updated once per env step
        (by the sampler, through ``observe``) rather than once per batch."""
        return isinstance(self.model, NormalizedModel) and self.model.stats_update == "step"

    @property
    def per_batch_statistics(self) -> bool:
        """True when the model's observation statistics are the learner's to update, once
        per batch (``update_normalization``)."""
        return isinstance(self.model, NormalizedModel) and not self.per_step_statistics

    def observe(self, observation: Observation) -> None:
        """A training step's full row of raw observations (``[B, *obs]``, slot order),
        before ``step`` acts on it: merged into per-step statistics, ignored otherwise."""
        if self.per_step_statistics:  # so the model is a NormalizedModel
            cast(NormalizedModel, self.model).update_normalization(torch.as_tensor(observation))

    def update_normalization(self, observation: Observation) -> None:
        """Add a batch's raw observations (``[T, B, *obs]``) to the model's observation
        statistics, if it normalizes its input per batch (a no-op otherwise: per-step
        statistics already saw every row through ``observe``)."""
        if self.per_batch_statistics:  # so the model is a NormalizedModel
            rows = tree_map(lambda x: x.reshape(-1, *x.shape[2:]), observation)
            cast(NormalizedModel, self.model).update_normalization(rows)

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(state)
